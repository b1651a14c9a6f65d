
# 2. The staged inspector and rc file must be the bytes the plan names.
for pair in "$INSPECTOR:$INSPECTOR_SHA256" "$RC_FILE:$RC_SHA256"; do
    file=${pair%:*}
    expected=${pair##*:}
    if [ -L "$file" ] || [ ! -f "$file" ]; then
        die 70 "$file is not a regular file"
    fi
    actual=$(hash_file <"$file") || die 70 "cannot hash $file"
    [ "$actual" = "$expected" ] || die 70 "$file does not match its digest"
done

