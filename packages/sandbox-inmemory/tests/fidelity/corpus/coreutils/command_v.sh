command -v ls > /dev/null && echo has-ls
command -v no-such-tool-here || echo none
