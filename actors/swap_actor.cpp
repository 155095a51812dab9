#include "actors/swap_actor.hpp"

#include <unordered_map>

namespace conveyor {
namespace {

struct PendingOrder {
  caf::typed_response_promise<SwapDone> reply;
  seq_id seq = 0;
  SwapDirection direction = SwapDirection::out;
};

struct swap_state {
  swap_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  std::shared_ptr<SwapEngine> engine;
  std::shared_ptr<FaultInjector> faults;
  uint64_t next_ticket = 0;
  std::unordered_map<uint64_t, PendingOrder> pending;  // submitted, not landed
  static inline const char* name = "swap";
};

swap_actor::behavior_type swapper(swap_actor::stateful_pointer<swap_state> self,
                                  std::shared_ptr<SwapEngine> engine, std::shared_ptr<FaultInjector> faults) {
  self->state.engine = std::move(engine);
  self->state.faults = std::move(faults);
  return {
      [self](swap_atom, const SwapOrder& order) -> caf::result<SwapDone> {
        auto& st = self->state;
        if (st.faults && st.faults->hit(FaultPoint::swap))
          return make_engine_error(
              Error{Errc::internal, "swap copy: " + describe_fault(FaultPoint::swap, st.faults->count(FaultPoint::swap))});
        if (!st.engine) return SwapDone{order.seq, order.direction, 0.0};
        const uint64_t ticket = st.next_ticket++;
        auto reply = self->make_response_promise<SwapDone>();
        st.pending.emplace(ticket, PendingOrder{reply, order.seq, order.direction});
        // The callback may run on any thread, even inside submit(): it only
        // sends a message, which this actor handles after this handler.
        try {
          st.engine->submit(order, [me = caf::actor_cast<swap_actor>(self), ticket](Expected<double> seconds) {
            if (seconds)
              caf::anon_send(me, landed_atom_v, ticket, *seconds);
            else
              caf::anon_send(me, landed_atom_v, ticket, seconds.error().message);
          });
        } catch (const std::exception& e) {  // a device engine's copy could not be queued
          st.pending.erase(ticket);
          reply.deliver(make_engine_error(Error{Errc::internal, std::string("swap copy: ") + e.what()}));
        }
        return reply;
      },
      [self](landed_atom, uint64_t ticket, double seconds) {
        auto& pending = self->state.pending;
        auto it = pending.find(ticket);
        if (it == pending.end()) return;
        it->second.reply.deliver(SwapDone{it->second.seq, it->second.direction, seconds});
        pending.erase(it);
      },
      // The copies failed after submit() returned (a device's copy stream):
      // an engine fault, as a copy that could not be queued is.
      [self](landed_atom, uint64_t ticket, const std::string& why) {
        auto& pending = self->state.pending;
        auto it = pending.find(ticket);
        if (it == pending.end()) return;
        it->second.reply.deliver(make_engine_error(Error{Errc::internal, "swap copy: " + why}));
        pending.erase(it);
      },
  };
}

}  // namespace

swap_actor spawn_swap(caf::actor_system& sys, std::shared_ptr<SwapEngine> engine,
                      std::shared_ptr<FaultInjector> faults) {
  return sys.spawn<caf::detached>(swapper, std::move(engine), std::move(faults));
}

}  // namespace conveyor
