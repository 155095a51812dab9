// What `conveyor serve --node-port` and `conveyor router` share: CAF's
// network layer (the middleman), and TLS with peer authentication through
// CAF's OpenSSL module.
//
// TLS takes three files, all given or none: this process's certificate and
// key, and the CA that signed the peers' certificates. Both ends then verify
// each other (CAF's openssl module requires and checks the peer's
// certificate when a CA is set), so a process without a certificate from
// that CA can neither submit work to a node nor pose as one.
#pragma once

#include <caf/all.hpp>

#include <string>

#include <CLI/CLI.hpp>

#include "actors/messages.hpp"
#include "model/status.hpp"

namespace conveyor::cli {

struct ClusterTls {
  std::string cert, key, ca;
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

void add_tls_options(CLI::App* cmd, ClusterTls& tls);
// All three files given and readable, or none.
Status check_tls(const ClusterTls& tls);
// Loads the middleman (and the OpenSSL module with the files when TLS is on).
void configure_cluster(caf::actor_system_config& cfg, const ClusterTls& tls);
// Publishes a node on host:port (0: any free port); the port bound.
Expected<uint16_t> publish_node(const node_actor& node, const std::string& host, uint16_t port, bool tls);

}  // namespace conveyor::cli
