#!/usr/bin/env bash
# `loupe tokenize` on a small tokenizer.json: ids per line, pairs, truncation, invalid
# UTF-8, empty lines, and the error paths (missing file, bad JSON, usage errors).
set -u
L=${LOUPE:?LOUPE must point at the loupe binary}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
cat > "$d/tokenizer.json" <<'J'
{"added_tokens":[{"id":0,"content":"[PAD]","special":true,"normalized":false},
 {"id":1,"content":"[UNK]","special":true,"normalized":false},
 {"id":2,"content":"[CLS]","special":true,"normalized":false},
 {"id":3,"content":"[SEP]","special":true,"normalized":false}],
 "normalizer":{"type":"BertNormalizer","lowercase":true},
 "pre_tokenizer":{"type":"BertPreTokenizer"},
 "post_processor":{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]},
 "model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,
 "hello":4,"world":5,"!":6,"##s":7}}}
J
expect() { # expect DESCRIPTION WANTED_OUTPUT -- command (stdin from $input)
  local what=$1 want=$2; shift 3
  local got
  got=$(printf '%b' "$input" | "$@" 2>&1)
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what"; echo "  wanted: $want"; echo "  got:    $got"; fail=1
  else
    echo "ok: $what"
  fi
}
input='Hello worlds!\n\nhello\xff world\n'
expect "single lines" $'2 4 5 7 6 3\n2 3\n2 4 5 3' -- "$L" tokenize --tokenizer "$d"
expect "no special" $'4 5 7 6\n\n4 5' -- "$L" tokenize --tokenizer "$d/tokenizer.json" --no-special
input='hello world\thello\n'
expect "pair" '2 4 5 3 4 3' -- "$L" tokenize --tokenizer "$d" --pair
expect "pair truncated" '2 4 3 4 3' -- "$L" tokenize --tokenizer "$d" --pair --max-length 5
input='hello world hello world\n'
expect "truncated" '2 4 5 3' -- "$L" tokenize --tokenizer "$d" --max-length 4
input='hello'
expect "last line without newline" '2 4 3' -- "$L" tokenize --tokenizer "$d"
input='hello\n'
expect "max-length too small for the specials" 'loupe tokenize: line 1: max_length 1 cannot hold the 2 special tokens' \
  -- "$L" tokenize --tokenizer "$d" --max-length 1
check_rc() { # check_rc WANTED_RC DESCRIPTION PATTERN -- command
  local want=$1 what=$2 pat=$3; shift 4
  local out rc
  out=$("$@" </dev/null 2>&1); rc=$?
  if [ "$rc" != "$want" ] || ! grep -q -- "$pat" <<<"$out"; then
    echo "FAIL: $what: exit $rc (wanted $want), output: $out"; fail=1
  else
    echo "ok: $what"
  fi
}
check_rc 1 "missing tokenizer" "$d/nope" -- "$L" tokenize --tokenizer "$d/nope"
printf '{"model": {' > "$d/bad.json"
check_rc 1 "invalid JSON" "bad.json: invalid JSON" -- "$L" tokenize --tokenizer "$d/bad.json"
: > "$d/empty.json"
check_rc 1 "empty file" "empty.json: empty file" -- "$L" tokenize --tokenizer "$d/empty.json"
check_rc 2 "no --tokenizer" "required" -- "$L" tokenize
check_rc 2 "bad --max-length" "max-length" -- "$L" tokenize --tokenizer "$d" --max-length zero
exit $fail
