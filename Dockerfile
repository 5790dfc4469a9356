# pingd: a static binary in a minimal image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/pingd ./cmd/pingd \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pingd /pingd
COPY --from=build --chown=nonroot:nonroot /out/data /data
VOLUME /data
ENV PINGD_HTTP_ADDR=0.0.0.0:8080 \
    PINGD_DB=/data/pingd.db
EXPOSE 8080
USER nonroot
ENTRYPOINT ["/pingd"]
CMD ["serve"]
