// What `conveyor serve --node-port` and `conveyor router` share: CAF's
// network layer (the middleman), and TLS with peer authentication
// (router/tls_transport.hpp: OpenSSL under CAF's BASP, not caf::openssl).
//
// TLS takes three files, all given or none: this process's certificate and
// key, and the CA that signed the peers' certificates. Both ends then verify
// each other (each requires the peer's certificate and checks that it chains
// to that CA; names and addresses are not checked), so a process without a
// certificate from that CA can neither submit work to a node nor pose as
// one. The files are loaded and checked at start-up (check_tls).
#pragma once

#include <caf/all.hpp>

#include <string>

#include <CLI/CLI.hpp>

#include "actors/messages.hpp"
#include "base/status.hpp"

namespace conveyor::cli {

struct ClusterTls {
  std::string cert, key, ca;
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

void add_tls_options(CLI::App* cmd, ClusterTls& tls);
// All three files given, loadable and fitting (the key is the
// certificate's), or none.
Status check_tls(const ClusterTls& tls);
// Loads the middleman; with TLS, puts the files where tls_middleman() reads
// them and sends the transport's lines to the server log.
void configure_cluster(caf::actor_system_config& cfg, const ClusterTls& tls);
// Publishes a node on host:port (0: any free port); the port bound.
Expected<uint16_t> publish_node(const node_actor& node, const std::string& host, uint16_t port, bool tls);

}  // namespace conveyor::cli
