# syntax=docker/dockerfile:1
# The mds image: one static binary (musl) on a distroless base, run as a non-root user. Both
# containers of deploy/ run it (`mds controller`, `mds webhook`).
#   docker build -t registry.example.invalid/mds:0.1.0 .
# Not built by CI (no container engine there); docs/operations.md says what to check.

# Build: Alpine's Rust targets musl and links statically by default.
FROM rust:1.95-alpine AS build
# ring (TLS) and mimalloc (the allocator) compile C; ring assembly too.
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p mds \
    && install -D -m 0755 target/release/mds /out/mds

# Run: no shell, no package manager; user 65532 (nonroot) owns nothing but the process.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mds /usr/local/bin/mds
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mds"]
