# zsh -f zsh_capture.zsh SCRIPT WORDS [fpath]: load the completion SCRIPT in an interactive zsh on
# a pty (sourced after compinit, or with 'fpath' autoloaded from its directory, as a user has it),
# type WORDS, press TAB, and print every candidate the completion system offers, one a line.
# tests/test_shell.py runs it.
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
if [[ $3 == fpath ]]; then  # installed: autoloaded from $fpath by compinit
  zpty -w z "PROMPT=''; RPROMPT=''; unsetopt zle_bracketed_paste 2>/dev/null; fpath=(${(q)1:h} \$fpath)"
  zpty -w z "autoload -Uz compinit; compinit -u -D"
else  # sourced after compinit
  zpty -w z "PROMPT=''; RPROMPT=''; unsetopt zle_bracketed_paste 2>/dev/null; autoload -Uz compinit; compinit -u -D"
  zpty -w z "source ${(q)1}"
fi
zpty -w z 'compadd () {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
  typeset -a __hits; builtin compadd -A __hits "$@"; local r=$?
  local h; for h in $__hits; do print -r -- "<H""IT>$h"; done
  return r
}'
zpty -w z 'zstyle ":completion:*" list-grouped false; zstyle ":completion:*" menu no'
zpty -w z '__begin () { print -r -- "<BEG""IN>" }; __end () { print -r -- "<E""ND>"; exit }'
zpty -w z 'compprefuncs=( __begin ); comppostfuncs=( __end )'
zpty -n -w z "$2"$'\t'
local line started=0
integer n=0
while zpty -r z line; do
  (( n++ > 20000 )) && break
  [[ $line == *"<BEGIN>"* ]] && started=1
  if (( started )) && [[ $line == *"<HIT>"* ]]; then print -r -- "${${line#*<HIT>}%%$'\r'*}"; fi
  [[ $line == *"<END>"* ]] && break
done
zpty -d z
