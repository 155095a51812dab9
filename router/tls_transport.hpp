// TLS for the connections between `conveyor router` and engine nodes: a
// middleman actor (the interface of CAF's, caf::io::middleman_actor:
// publish_atom, connect_atom) whose connections carry CAF's BASP over TLS
// with both ends authenticated.
//
// Why not caf::openssl (CAF 0.17's module; it verifies the same, see
// below): OpenSSL's per-thread error queue is emptied only inside its log
// statements, which Debian's build compiles out (CAF_LOG_LEVEL QUIET). After
// one failed handshake SSL_get_error() then reports every later would-block
// read on the multiplexer thread as fatal: one stranger knocking on a node
// (or one node with a bad certificate, seen by a router) closed all the
// process's authenticated connections, again at each retry. And a peer that
// connected and sent nothing kept the multiplexer thread spinning on the
// unfinished handshake, with no deadline. Here every OpenSSL call starts
// with an empty error queue; a node's handshakes run on a thread of their
// own with deadlines (3 s to the peer's first byte, 10 s in all; 64 at
// once, past which the oldest of those whose peers have sent nothing give
// way, then the oldest), so that only finished, verified connections reach
// CAF's event loop;
// a router's run on the detached thread that connects (as CAF's: one per
// node, tls_connector()); the files are loaded once, and
// the reasons for a refusal are logged (once a minute per peer host and
// reason).
//
// What is verified (the same policy as caf::openssl with a CA file):
//   - both ends present a certificate (SSL_VERIFY_PEER and
//     SSL_VERIFY_FAIL_IF_NO_PEER_CERT on both sides), proven by its key in
//     the handshake;
//   - it chains to the CA file given (only that file: not the system's
//     trust store), with OpenSSL's checks of signatures, validity dates and
//     CA constraints; an extended key usage, when the certificate has one,
//     must allow TLS server (a node) or client (a router) authentication;
//   - nothing about names: neither host names nor IP addresses are compared
//     with the certificate (no SAN/CN check). Any certificate the CA signed
//     is accepted on either side, so the CA must be the cluster's own.
// TLS 1.2 or later, no renegotiation, no session resumption.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <functional>
#include <string>

#include "base/status.hpp"

namespace conveyor {

struct TlsFiles {
  std::string cert, key, ca;  // PEM: this process's certificate (chain), its key, the CA peers must chain to
};

// Loads the three as the transport does: an error that says which file is
// wrong and why (unreadable, not PEM, a key that does not match the
// certificate, ...).
Status check_tls_files(const TlsFiles& files);

// Where the transport's lines go (handshakes refused or failed, peers
// authenticated); none by default. Set once, before any TLS connection.
using TlsLog = std::function<void(bool warning, const std::string& message)>;
void set_tls_log(TlsLog log);

// The TLS middleman of `sys`, started on first use with the files in
// sys.config().openssl_certificate, openssl_key and openssl_cafile; it
// stops with the system's middleman. A null handle (and a logged warning)
// when the files do not load: check them with check_tls_files() first.
caf::io::middleman_actor tls_middleman(caf::actor_system& sys);

// A middleman that connects to `peer` ("host:port") only, under TLS or
// plain. A connect blocks its middleman's thread (the TCP connect and the
// TLS handshake, up to 10 s each), so a router connects to each node
// through one of its own: a node that is hung, or an address that drops
// packets, holds up no other. Made on first use, stopped with the system's
// middleman or by release_node_connector(); null as tls_middleman() when
// `tls` and the files do not load.
caf::io::middleman_actor node_connector(caf::actor_system& sys, const std::string& peer, bool tls);
void release_node_connector(caf::actor_system& sys, const std::string& peer);

}  // namespace conveyor
