# Multi-stage build: a static binary on a distroless, non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /capacityd ./cmd/capacityd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /capacityd /capacityd
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/capacityd"]
CMD ["serve"]
