name=val
val=42
echo "${!name}"
