#include "actors/node.hpp"

namespace conveyor {
namespace {

struct node_state {
  Engine* engine = nullptr;
  NodeInfo info;
  static inline const char* name = "node";
};

node_actor::behavior_type node(node_actor::stateful_pointer<node_state> self, Engine* engine, NodeInfo info) {
  self->state.engine = engine;
  self->state.info = std::move(info);
  return {
      [self](submit_atom, GenerateRequest& request, caf::actor& sink) -> caf::result<request_id> {
        auto& st = self->state;
        if (st.info.draining) return make_engine_error(make_error(Errc::io_error, "the node is draining"));
        // The grammar of a constrained request travels as IR: bound here
        // to this node's vocabulary.
        if (Status s = st.engine->grammar_binder()->bind(request.sampling.grammar); !s)
          return make_engine_error(s.error());
        request.id = st.engine->next_request_id();
        request.automatic_id = true;
        return self->delegate(st.engine->scheduler(), submit_atom_v, std::move(request),
                              caf::actor_cast<token_sink_actor>(std::move(sink)));
      },
      [self](cancel_atom, request_id id) { self->send(self->state.engine->scheduler(), cancel_atom_v, id); },
      [self](cancel_atom, request_id id, int32_t index) {
        self->send(self->state.engine->scheduler(), cancel_atom_v, id, index);
      },
      [self](session_atom, std::string& name) {
        self->send(self->state.engine->scheduler(), session_atom_v, std::move(name));
      },
      [self](stats_atom) { return self->delegate(self->state.engine->scheduler(), stats_atom_v); },
      [self](describe_atom) { return self->state.info; },
      [self](drain_atom) { self->state.info.draining = true; },
  };
}

}  // namespace

NodeInfo describe_node(const Engine& engine, std::string name, std::string model) {
  const ModelConfig& mc = engine.model().config;
  NodeInfo info;
  info.name = std::move(name);
  info.model = std::move(model);
  info.architecture = mc.architecture;
  info.vocab_size = mc.vocab_size;
  info.dim = mc.dim;
  info.n_layers = mc.n_layers;
  info.context_length = mc.context_length;
  info.weights_fingerprint = engine.model().weights_fingerprint;
  info.block_size = engine.config().block_size;
  info.num_blocks = engine.num_blocks();
  return info;
}

node_actor spawn_node(caf::actor_system& sys, Engine& engine, std::string name, std::string model) {
  return sys.spawn<caf::detached>(node, &engine, describe_node(engine, std::move(name), std::move(model)));
}

}  // namespace conveyor
