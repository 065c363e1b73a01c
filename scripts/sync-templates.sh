#!/usr/bin/env bash
# Keeps the TinyGo scaffold of `buddy skill init` in step with skillkit/: skillkit
# is not published, so every generated project carries a copy of it
# (third_party/skillkit/, taken from templates/tinygo/third_party/skillkit/*.tmpl)
# and the project's go.sum and go-pdk requirement must match skillkit's.
#   scripts/sync-templates.sh          copy skillkit/ into templates/
#   scripts/sync-templates.sh --check  change nothing; fail listing what differs
# Copied: skillkit/*.go except tests, go.mod and go.sum. templates' Go tests
# (TestSkillkitCopy) make the same comparison.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

dst=templates/tinygo/third_party/skillkit
gomod_tmpl=templates/tinygo/go.mod.tmpl
# Pairs of source and template.
pairs=()
for f in skillkit/*.go; do
  [[ $f == *_test.go ]] && continue
  pairs+=("$f" "$dst/$(basename "$f").tmpl")
done
pairs+=(skillkit/go.mod "$dst/go.mod.tmpl" skillkit/go.sum "$dst/go.sum.tmpl"
  skillkit/go.sum templates/tinygo/go.sum.tmpl)

pdk_version() { sed -n 's/^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}github\.com\/extism\/go-pdk[[:space:]]\{1,\}\(v[^[:space:]]*\).*/\2/p' "$1" | head -1; }
want_pdk="$(pdk_version skillkit/go.mod)"
[[ -n $want_pdk ]] || { echo "sync-templates: no github.com/extism/go-pdk requirement in skillkit/go.mod" >&2; exit 1; }

differ=()
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
  src="${pairs[i]}" tmpl="${pairs[i + 1]}"
  cmp -s "$src" "$tmpl" && continue
  if ((check)); then
    differ+=("$tmpl (from $src)")
  else
    mkdir -p "$(dirname "$tmpl")"
    cp "$src" "$tmpl"
    echo "sync-templates: updated $tmpl" >&2
  fi
done
# Templates whose source is gone.
for tmpl in "$dst"/*.tmpl; do
  [[ -e $tmpl ]] || continue
  base="$(basename "$tmpl" .tmpl)"
  [[ -e skillkit/$base && $base != *_test.go ]] && continue
  if ((check)); then
    differ+=("$tmpl (skillkit/$base does not exist)")
  else
    rm -- "$tmpl"
    echo "sync-templates: removed $tmpl" >&2
  fi
done
# The project's own requirement on go-pdk.
have_pdk="$(pdk_version "$gomod_tmpl")"
if [[ $have_pdk != "$want_pdk" ]]; then
  if ((check)); then
    differ+=("$gomod_tmpl (go-pdk ${have_pdk:-missing}, skillkit has $want_pdk)")
  else
    sed -i "s#\(github\.com/extism/go-pdk[[:space:]]\{1,\}\)v[^[:space:]]*#\1$want_pdk#" "$gomod_tmpl"
    echo "sync-templates: $gomod_tmpl now requires go-pdk $want_pdk" >&2
  fi
fi

if ((${#differ[@]})); then
  echo "sync-templates: the TinyGo scaffold differs from skillkit/ (run scripts/sync-templates.sh):" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
((check)) && echo "sync-templates: templates/tinygo matches skillkit/" >&2
exit 0
