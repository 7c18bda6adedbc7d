y=$(case x in x) echo matched;; esac)
echo "$y"
