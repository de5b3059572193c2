//! Cluster duties: who owns a session. Today only the in-process lease of the embedded mode; the Redis
//! lease with fencing, the node registry, forwarding and the takeover sweep slot in behind `Leases`.

pub(crate) mod lease;
