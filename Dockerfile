# gpuplan in a container, for `deploy/kubernetes/`: built with the Rust toolchain, run as a
# non-root user on a minimal base (no shell, no package manager).
#   docker build -t ghcr.io/example/gpuplan:0.1.0 .

FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY benches ./benches
COPY schemas ./schemas
COPY policies ./policies
RUN cargo build --release --locked --bin gpuplan

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/gpuplan /usr/local/bin/gpuplan
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/gpuplan"]
CMD ["--help"]
