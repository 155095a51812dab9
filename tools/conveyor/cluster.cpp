#include "tools/conveyor/cluster.hpp"

#include <caf/io/all.hpp>

#include <fstream>

#include "http/server_log.hpp"
#include "router/tls_transport.hpp"

namespace conveyor::cli {

void add_tls_options(CLI::App* cmd, ClusterTls& tls) {
  cmd->add_option("--tls-cert", tls.cert, "TLS between router and nodes: this process's certificate (PEM)");
  cmd->add_option("--tls-key", tls.key, "TLS: its private key (PEM)");
  cmd->add_option("--tls-ca", tls.ca, "TLS: the CA certificate the peers' certificates must be signed by (PEM)");
}

Status check_tls(const ClusterTls& tls) {
  if (!tls.enabled()) return Status::ok();
  if (tls.cert.empty() || tls.key.empty() || tls.ca.empty())
    return make_error(Errc::invalid_argument, "--tls-cert, --tls-key and --tls-ca go together: give all three");
  for (const auto& [flag, path] : {std::pair{"--tls-cert", tls.cert}, {"--tls-key", tls.key}, {"--tls-ca", tls.ca}}) {
    if (!std::ifstream(path)) return make_error(Errc::invalid_argument, std::string(flag) + ": cannot read '" + path + "'");
  }
  // Loaded as the connections will load them: a key that does not match
  // the certificate, or a file that is not PEM, fails here and not at the
  // first connection.
  if (Status st = check_tls_files({tls.cert, tls.key, tls.ca}); !st)
    return make_error(Errc::invalid_argument, "TLS: " + st.error().message);
  return Status::ok();
}

void configure_cluster(caf::actor_system_config& cfg, const ClusterTls& tls) {
  cfg.load<caf::io::middleman>();
  if (tls.enabled()) {
    // Read by tls_middleman() (router/tls_transport.hpp), not by
    // caf::openssl, which is not loaded: see that header for why.
    cfg.openssl_certificate = tls.cert;
    cfg.openssl_key = tls.key;
    cfg.openssl_cafile = tls.ca;
    set_tls_log([](bool warning, const std::string& message) {
      http::log_line(warning ? http::LogLevel::warn : http::LogLevel::info, message);
    });
  }
}

Expected<uint16_t> publish_node(const node_actor& node, const std::string& host, uint16_t port, bool tls) {
  auto& sys = node.home_system();
  auto fail = [&](const std::string& why) {
    return make_error(Errc::io_error, "cannot publish the node on " + host + ":" + std::to_string(port) + ": " + why);
  };
  if (!tls) {
    auto bound = sys.middleman().publish(node, port, host.c_str(), true);
    if (!bound) return fail(to_string(bound.error()));
    return *bound;
  }
  const caf::io::middleman_actor mm = tls_middleman(sys);
  if (!mm) return fail("TLS could not start (see the line above)");
  caf::scoped_actor self{sys};
  Expected<uint16_t> bound = fail("no answer");
  self->request(mm, caf::infinite, caf::publish_atom_v, port, caf::actor_cast<caf::strong_actor_ptr>(node),
                sys.message_types(node), host, true)
      .receive([&](uint16_t actual) { bound = actual; }, [&](caf::error& err) { bound = fail(to_string(err)); });
  return bound;
}

}  // namespace conveyor::cli
