# ringlane's programs on Debian 12: the demo producer and consumer of docker-compose.yml.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake make gcc libc6-dev pkg-config libxxhash-dev libcmocka-dev librdkafka-dev \
      libuv1-dev libmemcached-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DRINGLANE_BUILD_TESTS=OFF \
      -DRINGLANE_BUILD_BENCH=OFF \
 && cmake --build /build -j "$(nproc)" \
 && cmake --install /build --prefix /opt/ringlane

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libxxhash0 librdkafka1 libuv1 libmemcached11 libssl3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/ringlane /opt/ringlane
ENV PATH=/opt/ringlane/bin:$PATH LD_LIBRARY_PATH=/opt/ringlane/lib
USER nobody
ENTRYPOINT []
CMD ["ringlane-demo", "--help"]
