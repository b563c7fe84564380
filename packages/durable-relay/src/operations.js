// The relay's operations that RelaySource and RelayRpc offer as methods, and
// the variables whose tokens cover each scope, written from the protocol's
// table (crates/protocol/src/operations) by `scripts/generate`. Do not edit.

export const OPERATIONS = [
  {
    "method": "POST",
    "name": "enqueue",
    "path": "/enqueue",
    "request": "EnqueueBody",
    "rpc": {
      "method": "enqueue",
      "returns": "Enqueued",
      "unwraps": null
    },
    "scope": "producer"
  },
  {
    "method": "GET",
    "name": "status",
    "path": "/status",
    "request": null,
    "rpc": {
      "method": "status",
      "returns": "SourceStatus",
      "unwraps": null
    },
    "scope": "reader"
  },
  {
    "method": "GET",
    "name": "relay_watermark",
    "path": "/watermark",
    "request": null,
    "rpc": {
      "method": "relayWatermark",
      "returns": "number",
      "unwraps": "relay_watermark"
    },
    "scope": "reader"
  },
  {
    "method": "GET",
    "name": "delivered_through",
    "path": "/delivered-through/{seq}",
    "request": null,
    "rpc": {
      "method": "deliveredThrough",
      "returns": "boolean",
      "unwraps": "delivered"
    },
    "scope": "reader"
  },
  {
    "method": "GET",
    "name": "targets",
    "path": "/parked?after&limit",
    "request": null,
    "rpc": {
      "method": "parkedTargets",
      "returns": "TargetPage",
      "unwraps": null
    },
    "scope": "reader"
  },
  {
    "method": "GET",
    "name": "parked_rows",
    "path": "/parked/{target}?after&limit",
    "request": null,
    "rpc": {
      "method": "parkedRows",
      "returns": "ParkedPage",
      "unwraps": null
    },
    "scope": "reader"
  },
  {
    "method": "GET",
    "name": "queued",
    "path": "/queued?target&after&limit",
    "request": null,
    "rpc": {
      "method": "queuedRows",
      "returns": "QueuedPage",
      "unwraps": null
    },
    "scope": "reader"
  },
  {
    "method": "POST",
    "name": "redrive",
    "path": "/parked/{target}/redrive",
    "request": null,
    "rpc": {
      "method": "redrive",
      "returns": "ActionOutcome",
      "unwraps": null
    },
    "scope": "operator"
  },
  {
    "method": "POST",
    "name": "discard",
    "path": "/parked/{target}/discard",
    "request": null,
    "rpc": {
      "method": "discard",
      "returns": "ActionOutcome",
      "unwraps": null
    },
    "scope": "operator"
  },
  {
    "method": "POST",
    "name": "rearm",
    "path": "/rearm",
    "request": null,
    "rpc": {
      "method": "rearm",
      "returns": "Rearmed",
      "unwraps": null
    },
    "scope": "operator"
  }
];

export const SCOPES = {
  "operator": [
    "RELAY_OPERATOR_TOKENS"
  ],
  "producer": [
    "RELAY_PRODUCER_TOKENS"
  ],
  "reader": [
    "RELAY_READER_TOKENS",
    "RELAY_OPERATOR_TOKENS"
  ]
};
