#include "http/http_session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <sstream>

#include "http/api_json.hpp"
#include "http/api_request.hpp"
#include "http/embeddings.hpp"
#include "http/metrics_text.hpp"
#include "http/playground/page_response.hpp"
#include "http/responses_routes.hpp"
#include "http/routes.hpp"
#include "http/tokenize_routes.hpp"
#include "http/origin_policy.hpp"
#include "http/websocket_session.hpp"
#include "http/ws_subprotocol.hpp"

namespace conveyor::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;

namespace {

constexpr size_t kMaxPipelinedBytes = 64 * 1024;  // read ahead while a response streams

ApiError shutting_down() {
  return ApiError{503, "the server is shutting down", "server_error", {}, "shutting_down"};
}

ApiError draining() {
  return ApiError{503, "the server is shutting down and accepts no new requests", "server_error", {},
                  "shutting_down"};
}

// A drained server is gone; a client that retries meets its successor (or
// the load balancer's next choice) after this many seconds.
constexpr const char* kDrainRetryAfterSeconds = "5";
// A connection past max_connections: others close all the time.
constexpr const char* kConnectionsRetryAfterSeconds = "1";

// How a request's route appears in the access log: the path, without the
// query, cut short if long (it may be any 404).
std::string logged_route(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return std::string(path.substr(0, 200));
}

template <class Response>
void set_cors(Response& res, const std::string& allow_origin) {
  if (allow_origin.empty()) return;
  res.set(bhttp::field::access_control_allow_origin, allow_origin);
  res.set(bhttp::field::vary, "Origin");
}

std::string sse_header(const std::string& cors_origin) {
  bhttp::response<bhttp::empty_body> res{bhttp::status::ok, 11};
  res.set(bhttp::field::server, "conveyor");
  res.set(bhttp::field::content_type, "text/event-stream");
  res.set(bhttp::field::cache_control, "no-cache");
  set_cors(res, cors_origin);
  res.chunked(true);
  std::ostringstream os;
  os << res.base();
  return os.str();
}

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket&& socket, std::shared_ptr<ServerState> state, ConnectionSlot slot)
    : executor_(socket.get_executor()), stream_(std::move(socket)), state_(std::move(state)), slot_(std::move(slot)) {}

HttpSession::~HttpSession() {
  for (const CancelFn& cancel : cancels_) cancel();
  state_->remove_session(registry_id_);
}

void HttpSession::run() {
  registry_id_ = state_->add_session(weak_from_this());
  net::dispatch(executor_, [self = shared_from_this()] {
    if (self->state_->stopping()) return self->close();
    if (!self->slot_) return self->refuse_connection();
    self->do_read();
  });
}

// Past max_connections: a short answer, no request read, no access-log line
// (a flood of them would flood the log; /metrics counts them). The client's
// request is read and dropped while we linger, so that the 503 is not lost
// to a reset.
void HttpSession::refuse_connection() {
  state_->refusals().add(Refusal::connections);
  busy_ = true;
  hold_ = shared_from_this();
  keep_alive_ = false;
  const ApiError full{503,
                      "the server has " + std::to_string(state_->options().max_connections) +
                          " connections open, its max_connections limit; retry later",
                      "server_error", {}, "too_many_connections"};
  send_response(503, error_json(full), "application/json", nullptr, kConnectionsRetryAfterSeconds);
}

void HttpSession::shutdown() {
  net::post(executor_, [self = shared_from_this()] {
    HttpSession& s = *self;
    s.shutting_down_ = true;
    s.keep_alive_ = false;
    if (!s.busy_) return s.close();  // idle: nothing to say goodbye to
    if (s.job_) {
      std::vector<std::string> out;
      s.job_->abort(shutting_down(), out);
      s.emit(out);
      s.finish_job();
    } else if (!s.response_complete_) {
      s.withdraw_plan();  // a plan that comes back after this answer is dropped
      s.send_error(shutting_down());  // being planned, or /metrics waiting for the engine
    }
  });
}

void HttpSession::cancel_requests(const std::string& reason) {
  net::post(executor_, [self = shared_from_this(), reason] {
    if (!self->job_ && self->planning_ != 0 && !self->closed_) {  // not on the engine yet: it never will be
      self->withdraw_plan();
      self->keep_alive_ = false;
      return self->send_error(ApiError{503, reason, "server_error", {}, "shutting_down"});
    }
    if (!self->job_) return;
    self->job_->set_cancel_reason(reason);
    self->cancel_job();  // the engine's last events end the job as usual
  });
}

// ---- reading requests ------------------------------------------------------------

void HttpSession::do_read() {
  if (closed_) return;
  busy_ = false;
  parser_.emplace();
  parser_->body_limit(state_->options().max_body_bytes);
  // A new connection is expected to speak at once; a kept-alive one may wait.
  if (buffer_.size() == 0 && requests_read_ > 0) return wait_for_request();
  read_header();
}

// Between requests: the idle timeout runs until the next request's first
// bytes, then the header timeout.
void HttpSession::wait_for_request() {
  read_phase_ = ReadPhase::idle;
  stream_.expires_after(millis(state_->options().idle_timeout_seconds));
  stream_.async_read_some(buffer_.prepare(4096),
                          beast::bind_front_handler(&HttpSession::on_first_bytes, shared_from_this()));
}

void HttpSession::on_first_bytes(beast::error_code ec, std::size_t bytes) {
  if (closed_) return;
  if (ec) return on_read(ec, 0);
  buffer_.commit(bytes);
  read_header();
}

void HttpSession::read_header() {
  read_phase_ = ReadPhase::header;
  head_only_ = false;
  stream_.expires_after(millis(state_->options().header_timeout_seconds));
  bhttp::async_read_header(stream_, buffer_, *parser_,
                           beast::bind_front_handler(&HttpSession::on_header, shared_from_this()));
}

// A client that sends "Expect: 100-continue" waits for our go-ahead before
// the body (some wait a second, some forever): give it once the header passed.
void HttpSession::on_header(beast::error_code ec, std::size_t bytes) {
  if (ec || closed_ || parser_->is_done()) return on_read(ec, bytes);
  read_phase_ = ReadPhase::body;
  stream_.expires_after(millis(state_->options().idle_timeout_seconds));
  const auto expect = parser_->get()[bhttp::field::expect];
  if (!beast::iequals(expect, "100-continue")) return read_body();
  static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code e, std::size_t) {
    if (e) return self->close();
    self->read_body();
  });
}

void HttpSession::read_body() {
  bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_read(beast::error_code ec, std::size_t) {
  if (closed_) return;
  if (ec == bhttp::error::body_limit) {
    state_->refusals().add(Refusal::body_size);
    open_record();
    busy_ = true;
    keep_alive_ = false;  // the rest of the body is still on the wire
    return send_error(ApiError{413,
                               "the request body is larger than " +
                                   std::to_string(state_->options().max_body_bytes) + " bytes",
                               "invalid_request_error", {}, "request_too_large"});
  }
  if (ec == bhttp::error::header_limit) {  // Beast's 8 KiB for the request line and fields
    state_->refusals().add(Refusal::header_size);
    open_record();
    busy_ = true;
    keep_alive_ = false;
    return send_error(ApiError{431, "the request's header is larger than 8 KiB", "invalid_request_error", {},
                               "request_header_fields_too_large"});
  }
  if (ec && ec != bhttp::error::end_of_stream && ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {
    open_record();
    busy_ = true;
    keep_alive_ = false;
    return send_error(bad_request("malformed HTTP request: " + ec.message()));
  }
  if (ec == beast::error::timeout)
    state_->refusals().add(read_phase_ == ReadPhase::header ? Refusal::header_timeout : Refusal::idle_timeout);
  if (ec) return close();  // end of stream, reset, timeout
  ++requests_read_;
  handle_request();
}

void HttpSession::open_record() {
  if (!parser_->is_header_done()) {
    record_ = RequestRecord(registry_id_, "", "");
    return;
  }
  const auto& req = parser_->get();
  record_ = RequestRecord(registry_id_, std::string(req.method_string()),
                          logged_route(origin_form(std::string_view(req.target().data(), req.target().size()))));
}

void HttpSession::handle_request() {
  busy_ = true;
  sse_started_ = false;
  // While the engine works on the answer, no I/O handler may hold the session
  // (the callbacks hold weak pointers): hold it until the answer is sent.
  hold_ = shared_from_this();
  stream_.expires_never();
  auto& req = parser_->get();
  keep_alive_ = req.keep_alive() && !shutting_down_;
  const std::string_view target = origin_form(std::string_view(req.target().data(), req.target().size()));
  const std::string_view method(req.method_string().data(), req.method_string().size());
  head_only_ = method == "HEAD";
  record_ = RequestRecord(registry_id_, std::string(method), logged_route(target));
  const auto origin_header = req[bhttp::field::origin];
  const std::string_view origin(origin_header.data(), origin_header.size());
  cors_origin_ = cors_allow_origin(origin, state_->options().allowed_origins);
  if (method == "OPTIONS") return answer_preflight(target);
  const RouteMatch m = match_route(method, target);
  if (m.route == Route::not_found)
    return send_error(ApiError{404, "no such path: " + std::string(target), "not_found_error", {}, "not_found"});
  if (m.route == Route::wrong_method)
    return send_error(ApiError{405,
                               std::string(req.method_string()) + " is not allowed here; use " + m.allow,
                               "invalid_request_error", {}, "method_not_allowed"},
                      m.allow);
  // A web page of another origin may not drive this server (http/origin_policy.hpp).
  if (m.route == Route::websocket) {
    const auto host = req[bhttp::field::host];
    if (!origin_allowed(origin, std::string_view(host.data(), host.size()), state_->options().allowed_origins))
      return send_error(ApiError{403,
                                 "a WebSocket from the page origin '" + std::string(origin) +
                                     "' is refused; start the server with --allowed-origins naming it to allow it",
                                 "invalid_request_error", {}, "origin_not_allowed"});
  }
  if (method == "POST") {
    const auto type = req[bhttp::field::content_type];
    if (!json_body_accepted(std::string_view(type.data(), type.size()), origin))
      return send_error(ApiError{415,
                                 type.empty() ? std::string("a web page's request body must be declared JSON "
                                                            "(Content-Type: application/json)")
                                              : "the request body must be JSON (Content-Type: application/json), "
                                                "not '" + std::string(type) + "'",
                                 "invalid_request_error", {}, "unsupported_media_type"});
  }
  std::string auth(req[bhttp::field::authorization]);
  if (auth.empty() && m.route == Route::websocket) {  // a browser's upgrade: http/ws_subprotocol.hpp
    const auto protocols = req[bhttp::field::sec_websocket_protocol];
    if (auto key = ws_protocol_key(std::string_view(protocols.data(), protocols.size()))) auth = "Bearer " + *key;
  }
  key_.reset();
  if (m.needs_key) {
    KeyGate::Identity who = state_->keys().authenticate(auth);
    if (!who.ok)
      return send_error(ApiError{401, "missing or wrong API key (Authorization: Bearer KEY)",
                                 "authentication_error", {}, "invalid_api_key"});
    key_ = std::move(who.key);
  }
  if (state_->draining() && m.route != Route::metrics) {
    keep_alive_ = false;
    if (m.route != Route::health) return send_error(draining());
    record_.set_error("draining");
    return send_response(503, health_json(Health::draining), "application/json", nullptr,
                         kDrainRetryAfterSeconds);
  }
  const ModelContext& model = state_->model();
  switch (m.route) {
    case Route::health:
      if (state_->engine().metrics().restarting)
        return send_response(503, health_json(Health::restarting), "application/json", nullptr, "1");
      if (!state_->engine().ready())
        return send_response(503, health_json(Health::no_nodes), "application/json", nullptr, "1");
      return send_response(200, health_json(), "application/json");
    case Route::models:
      return send_response(200, models_json(model.served_name, unix_seconds_now(), model.config.context_length),
                           "application/json");
    case Route::metrics: return start_metrics();
    case Route::page: {
      const auto etags = req[bhttp::field::if_none_match];
      return send_message(playground_response(*find_playground_asset(target.substr(0, target.find('?'))),
                                              std::string_view(etags.data(), etags.size()), keep_alive_));
    }
    case Route::completions: return start_completion(false);
    case Route::chat: return start_completion(true);
    case Route::responses: return start_response();
    case Route::response: {
      const ResponseScope scope = key_;
      const size_t q = target.find('?');
      const std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
      auto answer = method == "DELETE" ? delete_response(state_->responses(), scope, m.id)
                                       : stored_response(state_->responses(), scope, m.id, query);
      if (auto* e = std::get_if<ApiError>(&answer)) return send_error(*e);
      return send_response(200, std::move(std::get<std::string>(answer)), "application/json");
    }
    case Route::response_input_items: {
      const size_t q = target.find('?');
      auto answer = response_input_items(state_->responses(), key_, m.id,
                                         q == std::string_view::npos ? std::string_view() : target.substr(q + 1));
      if (auto* e = std::get_if<ApiError>(&answer)) return send_error(*e);
      return send_response(200, std::move(std::get<std::string>(answer)), "application/json");
    }
    case Route::embeddings: return start_embeddings();
    case Route::render:
    case Route::tokenize:
    case Route::detokenize: {  // a template or the tokenizer over a whole body: off the I/O thread too
      auto work = [body = std::make_shared<const std::string>(std::move(req.body())), route = m.route, model = &model] {
        return route == Route::tokenize     ? tokenize_response(*body, *model)
               : route == Route::detokenize ? detokenize_response(*body, *model)
                                            : render_response(*body, *model);
      };
      return plan_off_thread(std::move(work), [](HttpSession& s, std::variant<std::string, ApiError> answer) {
        if (auto* e = std::get_if<ApiError>(&answer)) return s.send_error(*e);
        s.send_response(200, std::move(std::get<std::string>(answer)), "application/json");
      });
    }
    case Route::release_session: {
      auto name = parse_session_release(req.body());
      if (auto* e = std::get_if<ApiError>(&name)) return send_error(*e);
      state_->engine().release_session(scoped_session(key_, std::get<std::string>(name)));
      return send_response(200, "{\"released\":true}", "application/json");
    }
    case Route::websocket: {
      if (!beast::websocket::is_upgrade(req))
        return send_error(bad_request("GET /v1/ws expects a WebSocket upgrade"));
      closed_ = true;  // the socket moves to the WebSocket session
      hold_.reset();
      record_.end(101);
      std::make_shared<WebSocketSession>(stream_.release_socket(), state_, registry_id_, std::move(slot_), key_)
          ->run(parser_->release());
      return;
    }
    default: return;
  }
}

// ---- completions ------------------------------------------------------------------

EventSink HttpSession::make_sink(int32_t first_choice) {
  std::weak_ptr<HttpSession> weak = weak_from_this();
  const uint64_t serial = serial_;
  return [state = state_, weak, serial, first_choice](const StreamEvent& event) {
    const int32_t choice = first_choice + event.index;
    state->post_to(weak, [serial, choice, event](HttpSession& s) { s.on_engine_event(serial, choice, event); });
  };
}

// Parsing and planning run on a planning thread (ServerState::plan): a chat
// template, the tokenizer and above all a grammar to compile would stall the
// I/O thread's other connections. The probe notices a client that goes
// meanwhile; `then` runs unless the request was answered (shutdown) or the
// connection closed in between. The request counts as in flight from here,
// so a drain that begins meanwhile waits for it as for a running one.
template <class Work, class Then>
void HttpSession::plan_off_thread(Work work, Then then) {
  const uint64_t serial = ++serial_;
  planning_ = serial;
  record_.run_on_engine(*state_);  // in flight from here: a drain waits for it
  withdraw_plan_ = state_->plan(weak_from_this(), std::move(work), [serial, then](HttpSession& s, auto result) {
    if (s.planning_ != serial || s.closed_) return;
    s.planning_ = 0;
    s.withdraw_plan_ = nullptr;
    then(s, std::move(result));
  });
  start_probe();
}

namespace {

struct PlannedCompletion {
  ApiRequest request;
  std::variant<RequestPlan, ApiError> plan = ApiError{};
};

}  // namespace

void HttpSession::start_completion(bool chat) {
  auto work = [body = std::make_shared<const std::string>(std::move(parser_->get().body())), chat,
               model = &state_->model()] {
    PlannedCompletion out;
    ParseResult parsed = parse_api_request(*body, chat ? Endpoint::chat : Endpoint::completions);
    if (parsed.error) {
      out.plan = std::move(*parsed.error);
      return out;
    }
    out.plan = plan_request(parsed.request, *model);
    out.request = std::move(parsed.request);
    return out;
  };
  plan_off_thread(std::move(work), [chat](HttpSession& s, PlannedCompletion planned) {
    s.run_completion(chat, planned.request, planned.plan);
  });
}

void HttpSession::run_completion(bool chat, const ApiRequest& r, std::variant<RequestPlan, ApiError>& planned) {
  if (auto* error = std::get_if<ApiError>(&planned)) return send_error(*error);
  RequestPlan& plan = std::get<RequestPlan>(planned);
  plan.session = scoped_session(key_, plan.session);
  if (!admit(plan)) return;

  JobSpec spec;
  spec.mode = r.stream ? OutputMode::sse : OutputMode::body;
  spec.chat = chat;
  spec.response_id = make_response_id(chat ? "chatcmpl-" : "cmpl-");
  spec.created = unix_seconds_now();
  spec.model = state_->model().served_name;
  spec.prompts = plan.prompts;
  spec.n = plan.n;
  spec.logprobs = plan.sampling.logprobs;
  spec.include_usage = r.include_usage;
  spec.return_token_ids = r.return_token_ids;
  spec.tokenizer = state_->model().tokenizer;
  spec.tool_calls = plan.tool_calls;
  spec.prompt = plan.prompt_output;
  const std::string id = spec.response_id;
  run_job(std::make_unique<CompletionJob>(std::move(spec)), plan, id, r.stream);
}

// POST /v1/responses (http/responses_routes.hpp): the chat machinery, with
// the Responses API's output.
void HttpSession::start_response() {
  auto work = [body = std::make_shared<const std::string>(std::move(parser_->get().body())),
               model = &state_->model(), store = &state_->responses(), scope = ResponseScope(key_)] {
    return prepare_response(*body, *model, *store, scope);
  };
  plan_off_thread(std::move(work), [](HttpSession& s, std::variant<PreparedResponse, ApiError> prepared) {
    if (auto* error = std::get_if<ApiError>(&prepared)) return s.send_error(*error);
    PreparedResponse& p = std::get<PreparedResponse>(prepared);
    if (!s.admit(p.plan)) return;
    const std::string id = p.job.response.id;
    const bool stream = p.job.stream;
    s.run_job(std::make_unique<ResponsesJob>(std::move(p.job)), p.plan, id, stream);
  });
}

// The request's place under its API key's limits; false: refused (answered).
bool HttpSession::admit(const RequestPlan& plan) {
  int64_t prompt_tokens = 0;
  for (const auto& prompt : plan.prompts) prompt_tokens += int64_t(prompt.size());
  auto admitted = state_->keys().admit(key_, prompt_tokens);
  if (auto* refused = std::get_if<KeyRefusal>(&admitted)) {
    if (refused->counted) state_->refusals().add(*refused->counted);
    send_error(refused->error, nullptr, refused->retry_after_seconds);
    return false;
  }
  lease_ = std::move(std::get<KeyLease>(admitted));
  return true;
}

void HttpSession::run_job(std::unique_ptr<ClientJob> job, const RequestPlan& plan, const std::string& id,
                          bool stream) {
  record_.set_id(id);
  record_.set_stream(stream);
  record_.run_on_engine(*state_);
  job_ = std::move(job);
  ++serial_;
  sse_started_ = false;
  const std::string tenant = tenant_of(key_);
  for (int32_t p = 0; p < int32_t(plan.prompts.size()); ++p) {
    GenerateRequest request = plan.request_for(p);
    request.tenant = tenant;  // admission policies may share the KV cache by key
    cancels_.push_back(state_->engine().submit(std::move(request), plan.stop, plan.shown_tokens, make_sink(p * plan.n)));
  }
  start_probe();
}

void HttpSession::on_engine_event(uint64_t serial, int32_t choice, const StreamEvent& event) {
  if (serial != serial_ || !job_) return;  // a finished request's late events
  if (!event.token_ids.empty()) {
    record_.on_tokens();
    lease_.charge(int64_t(event.token_ids.size()));
  }
  if (event.refused && event.index == 0) lease_.refund(job_->prompt_tokens_of(choice));
  std::vector<std::string> out;
  job_->on_event(choice, event, out);
  emit(out);
  if (job_ && job_->done()) finish_job();
}

void HttpSession::emit(std::vector<std::string>& payloads) {
  if (payloads.empty() || !job_ || !job_->streaming()) return;
  // Framed first: queueing the header may drop the job (output past its bound).
  std::string events = job_->frame_events(payloads);
  if (!sse_started_) {
    sse_started_ = true;
    queue_output(sse_header(cors_origin_));
  }
  queue_output(std::move(events));
}

void HttpSession::finish_job() {
  cancel_job();  // choices still running (after an error) stop now
  lease_.release();
  std::unique_ptr<ClientJob> job = std::move(job_);
  record_.set_job(job->summary());
  if (job->failure()) return send_error(*job->failure());
  if (!job->streaming()) return send_response(200, job->body(), "application/json");
  response_complete_ = true;
  record_.end(200);
  queue_output(std::string(kLastChunk));
}

void HttpSession::cancel_job() {
  for (const CancelFn& cancel : cancels_) cancel();
  cancels_.clear();
}

void HttpSession::drop_job() {
  if (job_) record_.set_job(job_->summary());
  cancel_job();
  lease_.release();
  job_.reset();
}

// ---- embeddings -------------------------------------------------------------------

// Parsed and checked here, computed on the port's embedding thread (never on
// this I/O thread), answered here. Like a completion it passes its key's
// limits first (its input tokens count as prompt tokens), counts as in
// flight for a drain, and is dropped if its client goes away before it starts.
void HttpSession::start_embeddings() {
  if (!state_->engine().can_embed()) {
    return send_error(ApiError{501,
                               "/v1/embeddings is not available here: this server's engine computes no embeddings "
                               "(a router forwards none to its nodes)",
                               "invalid_request_error", {}, "embeddings_not_supported"});
  }
  auto work = [body = std::make_shared<const std::string>(std::move(parser_->get().body())),
               model = &state_->model()] { return parse_embedding_request(*body, *model); };
  plan_off_thread(std::move(work), [](HttpSession& s, std::variant<EmbeddingRequest, ApiError> parsed) {
    if (auto* e = std::get_if<ApiError>(&parsed)) return s.send_error(*e);
    s.run_embeddings(std::get<EmbeddingRequest>(parsed));
  });
}

void HttpSession::run_embeddings(EmbeddingRequest& request) {
  const int64_t prompt_tokens = request.prompt_tokens();
  auto admitted = state_->keys().admit(key_, prompt_tokens);
  if (auto* refused = std::get_if<KeyRefusal>(&admitted)) {
    if (refused->counted) state_->refusals().add(*refused->counted);
    return send_error(refused->error, nullptr, refused->retry_after_seconds);
  }
  lease_ = std::move(std::get<KeyLease>(admitted));
  record_.run_on_engine(*state_);
  std::weak_ptr<HttpSession> weak = weak_from_this();
  const uint64_t serial = ++serial_;
  const bool base64 = request.base64;
  cancels_.push_back(state_->engine().embed_async(
      std::move(request.inputs), state_->options().pooling,
      [state = state_, weak, serial, base64, prompt_tokens](Expected<std::vector<std::vector<float>>> vectors) {
        state->post_to(weak, [serial, base64, prompt_tokens, vectors = std::move(vectors)](HttpSession& s) {
          if (serial != s.serial_ || s.response_complete_ || s.closed_) return;
          s.cancels_.clear();
          s.lease_.release();
          if (!vectors) return s.send_error(from_engine_error(vectors.error().code, vectors.error().message));
          s.send_response(200, embedding_response(*vectors, base64, s.state_->model().served_name, prompt_tokens),
                          "application/json");
        });
      }));
  start_probe();
}

// ---- metrics ----------------------------------------------------------------------

void HttpSession::start_metrics() {
  std::weak_ptr<HttpSession> weak = weak_from_this();
  const uint64_t serial = ++serial_;
  state_->engine().stats_async([state = state_, weak, serial](Expected<EngineStats> stats) {
    state->post_to(weak, [serial, stats = std::move(stats)](HttpSession& s) {
      if (serial != s.serial_ || s.response_complete_ || s.closed_) return;
      if (!stats) return s.send_error(from_engine_error(Errc::io_error, stats.error().message));
      std::string body = render_metrics(*stats, s.state_->engine().metrics(), s.state_->refusals());
      if (const auto& constraints = s.state_->model().constraints)
        body += render_grammar_cache_metrics(constraints->figures());
      s.send_response(200, body + s.state_->engine().extra_metrics(), "text/plain; version=0.0.4; charset=utf-8");
    });
  });
}

// ---- writing ----------------------------------------------------------------------

void HttpSession::send_error(const ApiError& error, const char* allow, int retry_after_seconds) {
  const std::string seconds = std::to_string(retry_after_seconds);
  const char* retry_after = retry_after_seconds > 0        ? seconds.c_str()
                            : error.status == 429          ? "1"
                            : error.code == "shutting_down" ? kDrainRetryAfterSeconds
                                                           : nullptr;
  record_.set_error(error.message);
  send_response(unsigned(error.status), error_json(error), "application/json", allow, retry_after);
}

void HttpSession::answer_preflight(std::string_view target) {
  const auto& req = parser_->get();
  const auto wanted = req[bhttp::field::access_control_request_method];
  const std::string method = wanted.empty() ? "GET" : std::string(wanted);
  const RouteMatch m = match_route(method, target);
  if (m.route == Route::not_found)
    return send_error(ApiError{404, "no such path: " + std::string(target), "not_found_error", {}, "not_found"});
  const auto origin = req[bhttp::field::origin];
  if (!origin.empty() && cors_origin_.empty())
    return send_error(ApiError{403,
                               "cross-origin requests from '" + std::string(origin) +
                                   "' are refused; start the server with --allowed-origins naming it to allow them",
                               "invalid_request_error", {}, "origin_not_allowed"});
  bhttp::response<bhttp::string_body> res{bhttp::status::no_content, 11};
  res.set(bhttp::field::server, "conveyor");
  const std::string allow = std::string(m.allow) + ", OPTIONS";
  res.set(bhttp::field::allow, allow);
  if (!cors_origin_.empty()) {
    res.set(bhttp::field::access_control_allow_methods, allow);
    const auto headers = req[bhttp::field::access_control_request_headers];
    res.set(bhttp::field::access_control_allow_headers,
            headers.empty() ? std::string("Authorization, Content-Type") : std::string(headers));
    res.set(bhttp::field::access_control_max_age, "600");
  }
  res.keep_alive(keep_alive_);
  res.prepare_payload();
  send_message(std::move(res));
}

void HttpSession::send_response(unsigned status, std::string body, const char* content_type,
                                const char* allow, const char* retry_after) {
  bhttp::response<bhttp::string_body> res{bhttp::int_to_status(status), 11};
  res.set(bhttp::field::server, "conveyor");
  res.set(bhttp::field::content_type, content_type);
  if (allow) res.set(bhttp::field::allow, allow);
  if (retry_after) res.set(bhttp::field::retry_after, retry_after);
  if (status == 401) res.set(bhttp::field::www_authenticate, "Bearer");
  res.keep_alive(keep_alive_);
  res.body() = std::move(body);
  res.prepare_payload();
  send_message(std::move(res));
}

void HttpSession::send_message(bhttp::response<bhttp::string_body> res) {
  record_.end(int(res.result_int()));
  set_cors(res, cors_origin_);
  if (head_only_) res.body().clear();  // Content-Length stays the body's
  std::ostringstream os;
  os << res;
  response_complete_ = true;
  queue_output(os.str());
}

void HttpSession::queue_output(std::string bytes) {
  if (closed_) return;
  queued_bytes_ += bytes.size();
  queue_.push_back(std::move(bytes));
  if (job_ && queued_bytes_ > state_->options().max_output_bytes) {
    // The client reads slower than the engine writes: drop it rather than
    // buffer without bound or slow the engine down.
    state_->refusals().add(Refusal::output_size);
    drop_job();
    return close();
  }
  if (!write_in_flight_) do_write();
}

void HttpSession::do_write() {
  if (queue_.empty() || closed_) return;
  // Everything queued goes out in one write: under load this turns many small
  // chunks into one system call.
  writing_.clear();
  for (std::string& s : queue_) writing_ += s;
  queue_.clear();
  write_in_flight_ = true;
  stream_.expires_after(millis(state_->options().idle_timeout_seconds));
  net::async_write(stream_, net::buffer(writing_),
                   beast::bind_front_handler(&HttpSession::on_write, shared_from_this()));
}

void HttpSession::on_write(beast::error_code ec, std::size_t bytes) {
  write_in_flight_ = false;
  queued_bytes_ -= std::min(queued_bytes_, bytes);
  if (ec) return close();  // the client went away: its request is cancelled in close()
  if (!queue_.empty()) return do_write();
  stream_.expires_never();
  if (response_complete_ && !job_) after_response();
}

void HttpSession::after_response() {
  response_complete_ = false;
  busy_ = false;
  hold_.reset();  // the caller's handler still holds the session
  if (!keep_alive_) {
    lingering_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  }
  // The probe read shares buffer_ with what comes next: stop it first; its
  // handler goes on.
  if (probing_) return stream_.socket().cancel();
  if (lingering_) return do_linger();
  do_read();
}

// Closing a socket with unread input resets the connection, and a reset can
// destroy the response before the client reads it (a 413 whose body is still
// on the wire). So: our side is shut, and what the client still sends is read
// and dropped until it closes too, for at most a second.
void HttpSession::do_linger() {
  if (closed_) return;
  buffer_.consume(buffer_.size());
  stream_.expires_after(std::chrono::seconds(1));
  stream_.async_read_some(buffer_.prepare(16384), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec) return self->close();
    self->do_linger();
  });
}

// ---- noticing a client that goes away ---------------------------------------------

void HttpSession::start_probe() {
  if (probing_ || closed_ || buffer_.size() >= kMaxPipelinedBytes) return;
  probing_ = true;
  stream_.socket().async_read_some(buffer_.prepare(4096),
                                   beast::bind_front_handler(&HttpSession::on_probe, shared_from_this()));
}

void HttpSession::on_probe(beast::error_code ec, std::size_t bytes) {
  probing_ = false;
  if (closed_) return;
  if (ec == net::error::operation_aborted) {
    if (lingering_) return do_linger();
    if (!busy_) do_read();  // cancelled by after_response: the next request
    return;
  }
  if (ec) {
    // End of stream or reset while a request runs: the client is gone.
    drop_job();
    return close();
  }
  buffer_.commit(bytes);  // a pipelined request: kept for the next read
  if (lingering_) return do_linger();
  if (busy_) return start_probe();
  do_read();
}

// The request being planned, if any, is not wanted: the planning or
// compiling it still waits for is not done.
void HttpSession::withdraw_plan() {
  planning_ = 0;
  if (withdraw_plan_) std::exchange(withdraw_plan_, nullptr)();
}

void HttpSession::close() {
  if (closed_) return;
  closed_ = true;
  hold_.reset();
  withdraw_plan();
  drop_job();
  record_.end(sse_started_ ? 200 : 499);  // unless the answer was complete: the client left
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace conveyor::http
