// durable-relay inside a Cloudflare Agents SDK Agent (`durable-relay/agents`).
// An Agent's Lifecycle owns the object's one alarm: its `alarm()` runs the
// Lifecycle's job queue and then sets the alarm to the next job, or deletes
// it. So the relay keeps its alarm as one job of that queue instead, through
// a Lifecycle capability: every path that arms the relay's alarm pushes the
// job, and the job, when it comes due, runs the relay's alarm. Only this
// entry imports `agents`; the package's main entry never does.

import { LifecycleCapability } from "agents/lifecycle";
import { RelayError, RelaySource } from "./index.js";

/** The id of the one job the relay keeps in the Lifecycle's queue: its alarm time. */
const ALARM_JOB = "relay-alarm";

/** The job's `fn`: what `onJob` runs when the job comes due. */
const ALARM_FN = "alarm";

/** The capability's id in the Lifecycle: job ids are scoped to it. */
const CAPABILITY_ID = "durable-relay";

/**
 * A Lifecycle capability that keeps a relay's alarm as a job of the
 * Lifecycle's queue. `alarm` is the store to give `RelaySource` (its `alarm`
 * option); `serve(relay)` names the relay the job runs. `agentRelay` does
 * both for an Agent; use the class directly on a Durable Object that
 * installs a Lifecycle itself.
 */
export class RelayCapability extends LifecycleCapability {
  /** The relay whose alarm the job runs, once `serve` named it. */
  #relay;

  constructor() {
    super(CAPABILITY_ID);
    /**
     * The relay's alarm as the job: `set` pushes it (replacing the time
     * before), `get` reads its time, `delete` cancels it.
     */
    this.alarm = Object.freeze({
      get: () => this.lifecycle.jobs.get(ALARM_JOB)?.time ?? null,
      set: (at) => this.lifecycle.jobs.push({ id: ALARM_JOB, fn: ALARM_FN, time: at }),
      delete: () => this.lifecycle.jobs.cancel(ALARM_JOB),
    });
  }

  /** Runs `relay`'s alarm when the job comes due. */
  serve(relay) {
    if (!(relay instanceof RelaySource)) {
      throw new RelayError("bad_configuration", "RelayCapability.serve takes the RelaySource built with its alarm", 500);
    }
    this.#relay = relay;
    return this;
  }

  /**
   * The job came due: the relay delivers, and arms its next time by pushing
   * the job again, which the Lifecycle keeps over this run's outcome. When
   * the relay needs no next time, returning nothing completes the job, as
   * the platform clears an alarm that fired.
   */
  async onJob({ job }) {
    if (job.fn !== ALARM_FN) return undefined;
    if (this.#relay === undefined) {
      // Loud, not a silent loss of the relay's alarm: the capability was installed without serve(relay).
      throw new RelayError("bad_configuration", "RelayCapability ran its job with no relay: call serve(relay)", 500);
    }
    try {
      await this.#relay.alarm();
    } catch {
      // The relay logged the failure (relay_alarm_error) and pushed its own
      // back-off as the job's next time. A throw here would make the
      // Lifecycle run the job again at once, ahead of that back-off.
    }
    return undefined;
  }
}

/**
 * A `RelaySource` for an Agents SDK `Agent`, in one line of the Agent's class
 * (`relay = agentRelay(this, { targets: "INBOXES" })`): installs a
 * `RelayCapability` in the Agent's Lifecycle and keeps the relay's alarm
 * with it. Do not override the Agent's `alarm()` or call `relay.alarm()`:
 * the Lifecycle runs it. Refuses, `bad_configuration`, an object with no
 * Lifecycle and an `alarm` option (the Lifecycle keeps the alarm).
 */
export function agentRelay(agent, options = {}) {
  if (typeof agent?.lifecycle?.use !== "function") {
    throw new RelayError("bad_configuration", "agentRelay takes an Agent (an object with a Lifecycle in `lifecycle`); call it as agentRelay(this, ...)", 500);
  }
  if (options?.alarm !== undefined) {
    throw new RelayError("bad_configuration", "agentRelay keeps the relay's alarm with the Agent's Lifecycle: leave the alarm option out", 500);
  }
  const capability = new RelayCapability();
  agent.lifecycle.use(capability);
  const relay = new RelaySource(agent.ctx, agent.env, { ...options, alarm: capability.alarm });
  capability.serve(relay);
  return relay;
}
