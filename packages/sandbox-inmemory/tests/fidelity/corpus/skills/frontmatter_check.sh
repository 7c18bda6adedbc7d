bash validate.sh SKILL.md
echo "rc=$?"
bash validate.sh broken.md
echo "rc=$?"
