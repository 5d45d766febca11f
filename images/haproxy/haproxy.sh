#!/bin/sh
# `haproxy` as the container's PATH finds it (/usr/local/sbin comes before Debian's /usr/sbin): the real binary with
# capd-py-limits.cfg read last, whatever command line the container was started with. Upstream CAPD replaces the
# image's entrypoint with its own (`haproxy -W -db -f /usr/local/etc/haproxy/haproxy.cfg`, kind's) and writes kind's
# config (maxconn 100000: 200030 fds). kind's load balancer runs --privileged and may raise its fd limit that far;
# a container here cannot (no CAP_SYS_RESOURCE, the daemon's own hard limit is 20000), and with haproxy's default
# strict limits every reload of that config fails ("Cannot raise FD limit ... Loading failure!") and the balancer
# keeps serving the placeholder config without a backend. The master re-executes /usr/sbin/haproxy with these
# same arguments on a reload, so the file stays part of every reload.
# images/build.sh keys this image by Dockerfile, haproxy.cfg and limits.cfg (not this file: build.sh is an input of
# every node image, so adding it there would rebuild them all); an edit here needs a matching edit of the Dockerfile.
exec /usr/sbin/haproxy "$@" -f /usr/local/etc/haproxy/capd-py-limits.cfg
