printf 'cat\ndog\nbird\n' | grep -E 'cat|dog'
