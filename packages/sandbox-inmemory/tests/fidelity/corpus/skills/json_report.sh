bash report.sh alpha 3
