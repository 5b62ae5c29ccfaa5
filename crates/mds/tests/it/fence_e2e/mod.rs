//! The admission webhooks end to end on a real control plane (mds-testkit): the API server calls
//! mds-webhook's server, running in this process on 127.0.0.1, at `clientConfig.url` with a
//! `caBundle` and `failurePolicy: Fail`, exactly as `mds certs --url` registers it. Each test has
//! a namespace, deploy/'s ServiceAccount and a webhook of its own (configurations scoped to the
//! namespace), so tests run side by side and one can stop its webhook.
//!
//! - `scaler_hooks`: validation refuses with `mds validate`'s lines; defaults and the inferred
//!   type are stored, and inferred again when a manifest switches blocks (D25, D28).
//! - `user_writes`: the binding fence on a user's writes (D24): counts of a bound target,
//!   other fields, hand-made annotations, orphan recovery, targets being deleted.
//! - `controller_writes`: the controller (`mds_operator::Operator::start`, in-process as the
//!   ServiceAccount) commits through the fence; with the webhook down writes fail and nothing
//!   is half-written, and the next pass commits once it is back.

mod controller_writes;
mod engine;
mod lab;
mod scaler_hooks;
mod user_writes;
