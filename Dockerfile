# SPDX-License-Identifier: BSD-2-Clause
# ringlane's programs on Debian 12: ringlane-demo as the producer and the consumers of
# docker-compose.yml (the same binary `make demo` runs on librdkafka's mock cluster).
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake make gcc libc6-dev pkg-config libxxhash-dev libmd-dev zlib1g-dev librdkafka-dev \
      libuv1-dev \
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
      libxxhash0 libmd0 zlib1g librdkafka1 libuv1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/ringlane /opt/ringlane
ENV PATH=/opt/ringlane/bin:$PATH LD_LIBRARY_PATH=/opt/ringlane/lib
USER nobody
ENTRYPOINT []
CMD ["ringlane-demo", "--help"]
