"""Worked examples for the extraction prompt, written for this project (no third-party text).

They teach the output style (names as written, one-sentence descriptions, UPPER_SNAKE
relations with evidence, standalone facts, empty lists for boilerplate) and they make the
fixed prompt prefix long enough to be cached: Claude Haiku 4.5 and Opus 4.5 cache a prefix
only from 4,096 tokens (see packs.llm.costs.MIN_CACHEABLE_TOKENS). A test checks that every
example validates against the tool schema models.
"""

from __future__ import annotations

EXAMPLES: list[dict] = [
    {
        "page_title": "Connection pooling | Harbor DB Guide",
        "heading_path": "Operations > Connection pooling > Pool sizing",
        "content": (
            "Harbor DB accepts at most `max_connections` client connections (100 by "
            "default). Each connection is served by its own backend process, so a server "
            "that holds thousands of idle connections wastes memory.\n\n"
            "Put a connection pooler such as **Ripple** between the application and the "
            "database. Ripple keeps a small pool of server connections and hands them to "
            "clients per transaction when `pool_mode = transaction` is set. In session "
            "mode a client keeps its server connection until it disconnects.\n\n"
            "Size the pool with `default_pool_size`: start with twice the number of CPU "
            "cores of the database host and raise it only while query latency stays flat. "
            "Prepared statements do not survive transaction pooling, because consecutive "
            "transactions of one client may run on different server connections."
        ),
        "answer": {
            "entities": [
                {"name": "Harbor DB", "type": "product",
                 "description": "A database server that runs one backend process per "
                                "client connection.", "aliases": []},
                {"name": "max_connections", "type": "config_option",
                 "description": "The Harbor DB setting that caps client connections, 100 "
                                "by default.", "aliases": []},
                {"name": "Ripple", "type": "tool",
                 "description": "A connection pooler that sits between applications and "
                                "Harbor DB.", "aliases": []},
                {"name": "pool_mode", "type": "config_option",
                 "description": "The Ripple setting that chooses session or transaction "
                                "pooling.", "aliases": []},
                {"name": "transaction pooling", "type": "concept",
                 "description": "Handing a server connection to a client for one "
                                "transaction at a time.",
                 "aliases": ["transaction mode"]},
                {"name": "session pooling", "type": "concept",
                 "description": "Keeping a server connection assigned to a client until it "
                                "disconnects.", "aliases": ["session mode"]},
                {"name": "default_pool_size", "type": "config_option",
                 "description": "The Ripple setting for the number of server connections "
                                "per pool.", "aliases": []},
                {"name": "prepared statement", "type": "concept",
                 "description": "A statement parsed once on a server connection and run "
                                "again later.", "aliases": []},
            ],
            "relationships": [
                {"source": "Ripple", "relation": "POOLS_CONNECTIONS_FOR",
                 "target": "Harbor DB",
                 "evidence": "Put a connection pooler such as Ripple between the "
                             "application and the database."},
                {"source": "pool_mode", "relation": "CONFIGURES", "target": "Ripple",
                 "evidence": "Ripple ... hands them to clients per transaction when "
                             "pool_mode = transaction is set."},
                {"source": "default_pool_size", "relation": "CONFIGURES", "target": "Ripple",
                 "evidence": "Size the pool with default_pool_size."},
                {"source": "transaction pooling", "relation": "BREAKS",
                 "target": "prepared statement",
                 "evidence": "Prepared statements do not survive transaction pooling."},
                {"source": "max_connections", "relation": "LIMITS", "target": "Harbor DB",
                 "evidence": "Harbor DB accepts at most max_connections client connections."},
            ],
            "facts": [
                {"text": "Harbor DB accepts 100 client connections by default "
                         "(max_connections).", "entity": "max_connections"},
                {"text": "Harbor DB serves each client connection with its own backend "
                         "process.", "entity": "Harbor DB"},
                {"text": "A good starting value for Ripple's default_pool_size is twice the "
                         "number of CPU cores of the database host.",
                 "entity": "default_pool_size"},
                {"text": "Prepared statements do not work with Ripple's transaction pooling, "
                         "because one client's transactions may run on different server "
                         "connections.", "entity": "transaction pooling"},
            ],
        },
    },
    {
        "page_title": "CLI reference | Quarry",
        "heading_path": "Commands > quarry sync > Flags",
        "content": (
            "`quarry sync SOURCE DEST` copies new and changed objects from SOURCE to DEST. "
            "It compares objects by size and modification time unless `--checksum` is "
            "given, in which case it reads both copies and compares their SHA-256 digests; "
            "this is slower but catches silent corruption.\n\n"
            "| Flag | Default | Meaning |\n|---|---|---|\n"
            "| `--delete` | off | remove objects from DEST that SOURCE no longer has |\n"
            "| `--dry-run` | off | print what would change, change nothing |\n"
            "| `--parallel N` | 4 | objects transferred at once |\n\n"
            "Always run `quarry sync --dry-run --delete` first: `--delete` cannot be undone. "
            "Credentials come from the `QUARRY_TOKEN` environment variable."
        ),
        "answer": {
            "entities": [
                {"name": "quarry sync", "type": "command",
                 "description": "The Quarry command that copies new and changed objects "
                                "from a source to a destination.", "aliases": []},
                {"name": "--checksum", "type": "config_option",
                 "description": "A quarry sync flag that compares objects by SHA-256 "
                                "digest instead of size and time.", "aliases": []},
                {"name": "SHA-256", "type": "standard",
                 "description": "The digest quarry sync compares when --checksum is "
                                "given.", "aliases": []},
                {"name": "--delete", "type": "config_option",
                 "description": "A quarry sync flag that removes destination objects the "
                                "source no longer has.", "aliases": []},
                {"name": "--dry-run", "type": "config_option",
                 "description": "A quarry sync flag that prints the changes without "
                                "making them.", "aliases": []},
                {"name": "--parallel", "type": "config_option",
                 "description": "A quarry sync flag for the number of objects transferred "
                                "at once, 4 by default.", "aliases": []},
                {"name": "QUARRY_TOKEN", "type": "config_option",
                 "description": "The environment variable that holds Quarry's "
                                "credentials.", "aliases": []},
            ],
            "relationships": [
                {"source": "--checksum", "relation": "CONFIGURES", "target": "quarry sync",
                 "evidence": "It compares objects by size and modification time unless "
                             "--checksum is given."},
                {"source": "--checksum", "relation": "USES", "target": "SHA-256",
                 "evidence": "it reads both copies and compares their SHA-256 digests"},
                {"source": "--dry-run", "relation": "PREVIEWS", "target": "--delete",
                 "evidence": "Always run quarry sync --dry-run --delete first."},
                {"source": "quarry sync", "relation": "READS_CREDENTIALS_FROM",
                 "target": "QUARRY_TOKEN",
                 "evidence": "Credentials come from the QUARRY_TOKEN environment variable."},
            ],
            "facts": [
                {"text": "Without --checksum, quarry sync compares objects by size and "
                         "modification time.", "entity": "quarry sync"},
                {"text": "quarry sync --checksum is slower but detects silent corruption.",
                 "entity": "--checksum"},
                {"text": "The --delete flag of quarry sync cannot be undone.",
                 "entity": "--delete"},
                {"text": "quarry sync transfers 4 objects at once unless --parallel says "
                         "otherwise.", "entity": "--parallel"},
            ],
        },
    },
    {
        "page_title": "Scheduling | Lattice Cluster Manager",
        "heading_path": "Concepts > Scheduling > Placement constraints",
        "content": (
            "The Lattice scheduler places each Job on a worker node that satisfies the "
            "job's placement constraints. A constraint is a label selector, for example "
            "`zone=eu-west`, matched against the labels an operator attached to the node "
            "with `lattice node label`.\n\n"
            "Hard constraints (`require:`) must match, or the job stays pending. Soft "
            "constraints (`prefer:`) only raise a node's score; when no node matches, the "
            "job runs anyway. The scheduler also spreads replicas of one job across "
            "failure domains: two replicas never share a node unless "
            "`allow_colocation: true` is set.\n\n"
            "A pending job is re-evaluated every 30 seconds and whenever a node joins."
        ),
        "answer": {
            "entities": [
                {"name": "Lattice scheduler", "type": "service",
                 "description": "The Lattice component that chooses a worker node for "
                                "each job.", "aliases": ["scheduler"]},
                {"name": "Job", "type": "concept",
                 "description": "A unit of work that Lattice runs as one or more replicas "
                                "on worker nodes.", "aliases": []},
                {"name": "placement constraint", "type": "concept",
                 "description": "A label selector that limits or ranks the nodes a job may "
                                "run on.", "aliases": ["constraint"]},
                {"name": "hard constraint", "type": "concept",
                 "description": "A require: constraint that a node must match for the job "
                                "to run there.", "aliases": ["require:"]},
                {"name": "soft constraint", "type": "concept",
                 "description": "A prefer: constraint that only raises a matching node's "
                                "score.", "aliases": ["prefer:"]},
                {"name": "lattice node label", "type": "command",
                 "description": "The command that attaches labels to a worker node.",
                 "aliases": []},
                {"name": "allow_colocation", "type": "config_option",
                 "description": "A job setting that lets two replicas share a node.",
                 "aliases": []},
            ],
            "relationships": [
                {"source": "Lattice scheduler", "relation": "PLACES", "target": "Job",
                 "evidence": "The Lattice scheduler places each Job on a worker node that "
                             "satisfies the job's placement constraints."},
                {"source": "hard constraint", "relation": "IS_A",
                 "target": "placement constraint",
                 "evidence": "Hard constraints (require:) must match, or the job stays "
                             "pending."},
                {"source": "soft constraint", "relation": "IS_A",
                 "target": "placement constraint",
                 "evidence": "Soft constraints (prefer:) only raise a node's score."},
                {"source": "allow_colocation", "relation": "CONFIGURES",
                 "target": "Lattice scheduler",
                 "evidence": "two replicas never share a node unless allow_colocation: "
                             "true is set"},
            ],
            "facts": [
                {"text": "A Lattice job whose hard constraints match no node stays pending.",
                 "entity": "hard constraint"},
                {"text": "A Lattice job whose soft constraints match no node runs anyway.",
                 "entity": "soft constraint"},
                {"text": "The Lattice scheduler re-evaluates a pending job every 30 seconds "
                         "and whenever a node joins.", "entity": "Lattice scheduler"},
                {"text": "Two replicas of one Lattice job never share a node unless "
                         "allow_colocation is true.", "entity": "allow_colocation"},
            ],
        },
    },
    {
        "page_title": "Webhooks | Parcel Payments API",
        "heading_path": "Guides > Webhooks > Verifying signatures",
        "content": (
            "Parcel signs every webhook request with HMAC-SHA256 over the raw request body, "
            "using your endpoint's signing secret, and sends the hex digest in the "
            "`Parcel-Signature` header together with a `t=` timestamp.\n\n"
            "To verify a request, recompute the digest over `t + \".\" + body` and compare "
            "it with a constant-time function such as `hmac.compare_digest`. Reject "
            "requests whose timestamp is more than five minutes old; this stops replay "
            "attacks. Parse the JSON only after the signature checks out, and answer with "
            "a 2xx status within 10 seconds, or Parcel retries the delivery with "
            "exponential backoff for up to three days."
        ),
        "answer": {
            "entities": [
                {"name": "Parcel", "type": "service",
                 "description": "A payments API that sends signed webhook requests.",
                 "aliases": ["Parcel Payments API"]},
                {"name": "webhook", "type": "concept",
                 "description": "An HTTP request Parcel sends to your endpoint when an "
                                "event happens.", "aliases": []},
                {"name": "HMAC-SHA256", "type": "standard",
                 "description": "The keyed hash Parcel uses to sign webhook bodies.",
                 "aliases": []},
                {"name": "signing secret", "type": "term",
                 "description": "The per-endpoint key used to compute webhook "
                                "signatures.", "aliases": []},
                {"name": "Parcel-Signature", "type": "api",
                 "description": "The HTTP header that carries the signature digest and "
                                "its timestamp.", "aliases": []},
                {"name": "hmac.compare_digest", "type": "api",
                 "description": "A constant-time comparison function suited to checking "
                                "signatures.", "aliases": []},
                {"name": "replay attack", "type": "concept",
                 "description": "Sending a captured valid request again later.",
                 "aliases": []},
            ],
            "relationships": [
                {"source": "Parcel", "relation": "SIGNS_WITH", "target": "HMAC-SHA256",
                 "evidence": "Parcel signs every webhook request with HMAC-SHA256 over the "
                             "raw request body."},
                {"source": "HMAC-SHA256", "relation": "USES", "target": "signing secret",
                 "evidence": "using your endpoint's signing secret"},
                {"source": "Parcel-Signature", "relation": "CARRIES_SIGNATURE_OF",
                 "target": "webhook",
                 "evidence": "sends the hex digest in the Parcel-Signature header"},
                {"source": "hmac.compare_digest", "relation": "VERIFIES",
                 "target": "Parcel-Signature",
                 "evidence": "compare it with a constant-time function such as "
                             "hmac.compare_digest"},
            ],
            "facts": [
                {"text": "Parcel webhook signatures are computed over the timestamp, a dot "
                         "and the raw request body.", "entity": "Parcel-Signature"},
                {"text": "Parcel webhook requests with a timestamp older than five minutes "
                         "should be rejected to stop replay attacks.",
                 "entity": "replay attack"},
                {"text": "Parcel retries a webhook delivery with exponential backoff for up "
                         "to three days when the endpoint does not answer 2xx within 10 "
                         "seconds.", "entity": "webhook"},
            ],
        },
    },
    {
        "page_title": "API reference | tidal (Python)",
        "heading_path": "tidal.resample > Parameters and return value",
        "content": (
            "`tidal.resample(series, rule, *, how=\"mean\", closed=\"left\")` groups a "
            "`TimeSeries` into regular intervals and aggregates each interval.\n\n"
            "- `rule` is an interval string such as `\"5min\"` or `\"1h\"`; an unknown "
            "unit raises `IntervalError`.\n"
            "- `how` names the aggregation: `mean`, `sum`, `min`, `max` or `last`.\n"
            "- `closed` says which edge of each interval is inclusive.\n\n"
            "It returns a new `TimeSeries` whose index holds the interval starts; the input "
            "is left unchanged. Empty intervals become `NaN` for `mean` and `0` for `sum`. "
            "Since tidal 2.0, `resample` no longer accepts the `fill=` argument: call "
            "`TimeSeries.fillna` on the result instead."
        ),
        "answer": {
            "entities": [
                {"name": "tidal.resample", "type": "api",
                 "description": "A tidal function that aggregates a TimeSeries over regular "
                                "intervals.", "aliases": ["resample"]},
                {"name": "TimeSeries", "type": "api",
                 "description": "The tidal class for values indexed by time.",
                 "aliases": []},
                {"name": "rule", "type": "config_option",
                 "description": "The resample parameter giving the interval length, such "
                                "as 5min or 1h.", "aliases": []},
                {"name": "how", "type": "config_option",
                 "description": "The resample parameter naming the aggregation: mean, "
                                "sum, min, max or last.", "aliases": []},
                {"name": "IntervalError", "type": "api",
                 "description": "The exception raised for an interval string with an "
                                "unknown unit.", "aliases": []},
                {"name": "TimeSeries.fillna", "type": "api",
                 "description": "The TimeSeries method that fills missing values.",
                 "aliases": ["fillna"]},
                {"name": "tidal", "type": "library",
                 "description": "A Python library for time series.", "aliases": []},
            ],
            "relationships": [
                {"source": "tidal.resample", "relation": "RETURNS", "target": "TimeSeries",
                 "evidence": "It returns a new TimeSeries whose index holds the interval "
                             "starts."},
                {"source": "tidal.resample", "relation": "RAISES", "target": "IntervalError",
                 "evidence": "an unknown unit raises IntervalError"},
                {"source": "TimeSeries.fillna", "relation": "REPLACES",
                 "target": "tidal.resample",
                 "evidence": "resample no longer accepts the fill= argument: call "
                             "TimeSeries.fillna on the result instead."},
                {"source": "tidal.resample", "relation": "PART_OF", "target": "tidal",
                 "evidence": "tidal.resample(series, rule, *, how=\"mean\", "
                             "closed=\"left\")"},
            ],
            "facts": [
                {"text": "tidal.resample returns a new TimeSeries and leaves its input "
                         "unchanged.", "entity": "tidal.resample"},
                {"text": "With how=\"mean\", tidal.resample turns empty intervals into NaN; "
                         "with how=\"sum\" they become 0.", "entity": "how"},
                {"text": "Since tidal 2.0, tidal.resample no longer accepts a fill= "
                         "argument.", "entity": "tidal.resample"},
            ],
        },
    },
    {
        "page_title": "Harbor DB Guide",
        "heading_path": "Feedback",
        "content": "Was this page helpful? Yes | No\n\nEdit this page · Report an issue",
        "answer": {
            "entities": [
                {"name": "Harbor DB Guide", "type": "product",
                 "description": "The documentation this page belongs to.", "aliases": []},
            ],
            "relationships": [],
            "facts": [],
        },
    },
]
