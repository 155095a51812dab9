#include "tools/conveyor/cluster.hpp"

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <fstream>

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
  return Status::ok();
}

void configure_cluster(caf::actor_system_config& cfg, const ClusterTls& tls) {
  cfg.load<caf::io::middleman>();
  if (tls.enabled()) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = tls.cert;
    cfg.openssl_key = tls.key;
    cfg.openssl_cafile = tls.ca;
  }
}

Expected<uint16_t> publish_node(const node_actor& node, const std::string& host, uint16_t port, bool tls) {
  auto bound = tls ? caf::openssl::publish(node, port, host.c_str(), true)
                   : node.home_system().middleman().publish(node, port, host.c_str(), true);
  if (!bound)
    return make_error(Errc::io_error, "cannot publish the node on " + host + ":" + std::to_string(port) + ": " +
                                          to_string(bound.error()));
  return *bound;
}

}  // namespace conveyor::cli
