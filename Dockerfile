# syntax=docker/dockerfile:1
# A static capacityd on a distroless, non-root image.
#
# Base images are pinned by digest, so that a rebuild uses exactly the image
# that was reviewed (the tag is kept for readers; the digest decides). To bump
# one, look the multi-platform index digest up on a machine that reaches the
# registry:
#   docker buildx imagetools inspect golang:1.26-bookworm
#   docker buildx imagetools inspect gcr.io/distroless/static-debian12:nonroot
# and replace the digest (see docs/operations.md, "Container images"). Both
# can also be given at build time: --build-arg GO_IMAGE=...
ARG GO_IMAGE=golang:1.26.8-bookworm@sha256:9fdc884aacc3bec89b20ffc69f4bb369c78210e3e4f600387b5128b12c199f81
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:b7bb25d9f7c31d2bdd1982feb4dafcaf137703c7075dbe2febb41c24212b946f

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
# The typed client is a module of its own that go.mod replaces with ./client.
COPY client/go.mod client/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /capacityd ./cmd/capacityd

FROM ${RUNTIME_IMAGE}
COPY --from=build /capacityd /capacityd
USER nonroot:nonroot
ENV LISTEN_ADDR=:8080
# /metrics on a listener of its own, for Prometheus on the internal network:
# never publish this port.
ENV METRICS_ADDR=:9090
EXPOSE 8080
# Ready means PostgreSQL answers (Redis down only degrades). The image has
# no shell or curl: the binary checks itself.
HEALTHCHECK --interval=10s --timeout=5s --start-period=40s --retries=3 \
  CMD ["/capacityd", "health", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/capacityd"]
CMD ["serve"]
