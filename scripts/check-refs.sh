#!/usr/bin/env bash
# Checks that every file the project's sources and documents refer to exists,
# references into folders that no longer exist included.
# Each path-like word of the .go, .md, .sh, .c, .h, .cpp, .cu and .py files (a
# path under a top-level directory, or the name of a document or script) must
# name a file or directory, relative to the referring file or to the
# repository root; a bare name may live anywhere in the repository.
# Placeholders (<sh>, *, $VAR), URLs, absolute paths, Go import paths and
# system headers are not references; nor are package.Identifier names
# and the scratch files a Go test creates. Prints each dangling reference as
# FILE:LINE: PATH and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files --cached --others --exclude-standard '*.go' '*.md' '*.sh' '*.c' '*.h' '*.cpp' '*.cu' '*.py')
names=$(git ls-files --cached --others --exclude-standard | sed 's|.*/||' | sort -u)
# Top-level directories, those of earlier commits included: a reference into
# a folder that was moved or removed is caught, not taken for plain text.
tops=$({ git ls-files --cached --others --exclude-standard; git log --format= --name-only 2>/dev/null || true; } |
  grep / | cut -d/ -f1 | sort -u | paste -sd'|')
ext='md|sh|py|cmake'
# Paths under a top-level directory, and names of documents and scripts (bare
# source file names are too often code: c.h, f.go).
pattern='(^|[^A-Za-z0-9_./$-])(('"$tops"')/[A-Za-z0-9_./-]*[A-Za-z0-9_]|[A-Za-z0-9_.-]+\.('"$ext"'))([^A-Za-z0-9_/]|$)'
goroot=$(go env GOROOT 2>/dev/null || true)
bad=0
for f in $files; do
  dir=$(dirname "$f")
  while IFS=: read -r line text; do
    for ref in $(grep -oE "$pattern" <<<"$text" | sed -E 's/^[^A-Za-z0-9_]//; s/[^A-Za-z0-9_]$//'); do
      case "$ref" in
        python/mneme*) continue ;; # the Python package lives in its own tree
      esac
      [ -e "$dir/$ref" ] || [ -e "$ref" ] && continue
      # A standard library package (runtime/debug) is an import, not a file.
      [ -n "$goroot" ] && [ -d "$goroot/src/$ref" ] && continue
      # pkg/path.Identifier names a Go declaration of a package directory.
      [[ "$ref" =~ ^(.*)\.[A-Z][A-Za-z0-9_]*$ ]] && [ -d "${BASH_REMATCH[1]}" ] && continue
      # A test names the scratch files it creates; they are not references.
      [[ "$f" == *_test.go && "$ref" != */* ]] && continue
      [[ "$ref" != */* ]] && grep -qxF "$ref" <<<"$names" && continue
      echo "$f:$line: $ref"
      bad=1
    done
  done < <(grep -nE "$pattern" "$f" | grep -vE 'https?://|github\.com/|#include <' || true)
done
exit $bad
