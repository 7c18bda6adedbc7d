bash summary.sh data.csv
