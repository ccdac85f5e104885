# syntax=docker/dockerfile:1
# A static capacityd on a distroless, non-root image.
#
# Base images: pin each by digest so that a rebuild uses exactly the image
# that was reviewed. Look the digest up with
#   docker buildx imagetools inspect golang:1.26-bookworm
#   docker buildx imagetools inspect gcr.io/distroless/static-debian12:nonroot
# and set the ARG to NAME:TAG@sha256:<the "Digest:" line> (the multi-arch
# index digest). To bump, look it up again and replace it (see
# docs/operations.md, "Container images"). Until then they follow their
# tags. Both can also be given at build time: --build-arg GO_IMAGE=...
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /capacityd ./cmd/capacityd

FROM ${RUNTIME_IMAGE}
COPY --from=build /capacityd /capacityd
USER nonroot:nonroot
ENV LISTEN_ADDR=:8080
EXPOSE 8080
# Ready means PostgreSQL answers (Redis down only degrades). The image has
# no shell or curl: the binary checks itself.
HEALTHCHECK --interval=10s --timeout=5s --start-period=40s --retries=3 \
  CMD ["/capacityd", "health", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/capacityd"]
CMD ["serve"]
