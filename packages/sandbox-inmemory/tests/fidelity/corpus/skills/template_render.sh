bash render.sh template.txt name=World lang=bash
