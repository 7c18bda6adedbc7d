echo "$HOME"
echo "$USER"
echo "$PWD"
echo "$SHELL"
