#!/bin/sh
# Blocks destructive shell commands before Claude Code (or agentos) runs
# them. Exit 2 blocks the call and shows stderr to the model. Like Claude
# Code's example validator, it lets every tool but Bash through itself.
input=$(cat)
case "$input" in
  *'"tool_name":"Bash"'*) ;;
  *) exit 0 ;;
esac
command=$(printf '%s' "$input" | sed -n 's/.*"command":"\([^"]*\)".*/\1/p')
case "$command" in
  *"rm -rf"*|*"rm -fr"*|*"git push --force"*)
    echo "guard.sh: refusing destructive command: $command" >&2
    exit 2
    ;;
esac
exit 0
