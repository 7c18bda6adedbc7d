up() { tr a-z A-Z; }
echo abc | up
