// An engine node: one engine's request interface (node_actor, in
// actors/messages.hpp) for routers on other machines, published on CAF's
// middleman (`conveyor serve --node-port`).
//
//   router relay ──submit(GenerateRequest, sink)──▶ node ──▶ scheduler
//   scheduler ──TokenEvent──▶ sink           (across the network, CAF's BASP)
//   router relay ──cancel(id)──▶ node ──▶ scheduler
//
// The node gives each request an id of the engine's automatic range (so a
// router's ids never meet the node's own HTTP clients'), and answers it; the
// scheduler monitors the sink, so a router that goes away (its connection
// lost) cancels its requests. Text, stop strings and metrics are the
// router's: the node sends token events only. While draining (drain_atom,
// SIGTERM on `serve`) it refuses new requests with Errc::io_error, so a
// router places them on another node. A constrained request's grammar
// arrives as IR and is compiled here (up to a second for a schema of
// thousands of properties): the node runs on a thread of its own (detached),
// so the compile never holds the CAF worker the scheduler runs on.
#pragma once

#include <string>

#include "actors/engine.hpp"
#include "actors/messages.hpp"

namespace conveyor {

// `name` is what the node calls itself; `model` the served model's name.
// The engine must outlive the actor.
node_actor spawn_node(caf::actor_system& sys, Engine& engine, std::string name, std::string model);

// The NodeInfo an engine's node describes itself with.
NodeInfo describe_node(const Engine& engine, std::string name, std::string model);

}  // namespace conveyor
