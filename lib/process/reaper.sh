#!/bin/sh
# reaper.sh COMMAND [ARG...]
#
# Runs COMMAND as a child and ties its life to our standard input: when the parent that
# holds the other end of the pipe goes away (exits, crashes, is SIGKILLed), the read
# below sees end-of-file and the command is sent SIGTERM, then SIGKILL. The parent stops
# the command normally by signalling our whole process group; we ignore that signal
# ourselves so that we outlive the command and report its real exit status.
exec 3<&0
# HZ_REAPER_UMASK: the file creation mask of the command (e.g. 077: files only for us).
if [ -n "${HZ_REAPER_UMASK:-}" ]; then umask "$HZ_REAPER_UMASK"; fi
"$@" </dev/null &
child=$!
trap '' TERM INT HUP
(
  while read -r _ <&3; do :; done
  kill -TERM "$child" 2>/dev/null
  sleep 3
  kill -KILL "$child" 2>/dev/null
) &
watcher=$!
wait "$child"
status=$?
kill -KILL "$watcher" 2>/dev/null
exit "$status"
