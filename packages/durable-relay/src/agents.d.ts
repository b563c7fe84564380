// The API of `durable-relay/agents`: the relay inside a Cloudflare Agents SDK
// Agent. Its types come from `agents` (a peer dependency of this entry only),
// imported as types.

import type { Lifecycle, LifecycleCapability, LifecycleJobContext } from "agents/lifecycle";
import type { AlarmStore, RelaySource, RelaySourceOptions } from "./index.js";

/**
 * A Lifecycle capability that keeps a relay's alarm as one job of the Lifecycle's queue: give
 * `alarm` to `RelaySource` (its `alarm` option) and the relay to `serve`. `agentRelay` does both for
 * an Agent.
 */
export declare class RelayCapability extends LifecycleCapability {
  constructor();
  /** The relay's alarm as the job: pass it as `RelaySource`'s `alarm` option. */
  readonly alarm: AlarmStore;
  /** Runs `relay`'s alarm when the job comes due. */
  serve(relay: RelaySource<any>): this;
  /** Runs the relay's alarm; the relay arms its next time by pushing the job again. */
  onJob(context: LifecycleJobContext): Promise<undefined>;
}

/**
 * A `RelaySource` for an Agents SDK `Agent`, in one line of the Agent's class:
 * `relay = agentRelay(this, { targets: "INBOXES" })`. Installs a `RelayCapability` in the Agent's
 * Lifecycle, which keeps the relay's alarm as a job and runs it: do not override `alarm()` or call
 * `relay.alarm()` yourself. Throws a `RelayError` (`bad_configuration`) as `RelaySource` does, and
 * for an `alarm` option (the Lifecycle keeps the alarm).
 */
export declare function agentRelay<Env extends object>(
  agent: { readonly lifecycle: Lifecycle<Env, any> },
  options?: Omit<RelaySourceOptions<Env>, "alarm">,
): RelaySource<Env>;
