echo {a,b}{1,2}
echo {1..5}
echo {01..03}
echo {a..e..2}
