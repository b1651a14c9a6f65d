# 6. Import into the attempt. -o writes through symlinks, dangling ones too.
for target in "$CANDIDATE" "$PARTIAL" "$CHAIN_RECORD"; do
    if [ -e "$target" ] || [ -L "$target" ]; then
        die 73 "$target already exists"
    fi
done
partial_owned=1
say "importing $source_uri"
progress download
run_import
check_image_architecture
if [ -L "$PARTIAL" ] || [ ! -f "$PARTIAL" ]; then
    die 66 "the import did not produce a regular file"
fi
mv -T -- "$PARTIAL" "$CANDIDATE"
partial_owned=0
write_chain_record
write_architecture_record
