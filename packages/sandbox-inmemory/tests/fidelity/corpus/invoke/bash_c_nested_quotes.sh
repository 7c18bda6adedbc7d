bash -c "echo \"inner \$((1+2))\""
