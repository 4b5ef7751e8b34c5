# An image with sbx, bubblewrap and the tools a sandboxed command usually
# needs, running as a user that is not root. Build and check it:
#
#   make docker        # scripts/build bin/sbx && docker build -t sbx .
#   docker run --rm --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     --security-opt systempaths=unconfined sbx doctor
#
# The three options are what bubblewrap needs from Docker: Docker's default
# seccomp profile refuses the user namespaces the sandbox is made of, its
# AppArmor profile refuses mounts, and the paths it masks in /proc make a
# fresh /proc impossible to mount in a new user namespace. The sandbox then
# builds its own, tighter, seccomp filter and mount table. No capability is
# added and the container runs as the user "agent". Resource limits that need
# a cgroup (--max-procs, --max-memory) fall back as for any user without a
# delegated cgroup; give the container its own with `docker run --memory
# --pids-limit`.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
COPY bin/sbx /usr/local/bin/sbx
RUN useradd --create-home --uid 1000 agent && mkdir /work \
 && mkdir -p /home/agent/.local/state && chown -R agent: /work /home/agent/.local
# sbx stages each run's writes in an overlay in its state directory, which
# cannot be on the container's own overlayfs root: a volume (a directory of
# the host's file system) is made for it in every container.
VOLUME /home/agent/.local/state
USER agent
WORKDIR /work
ENTRYPOINT ["sbx"]
CMD ["doctor"]
