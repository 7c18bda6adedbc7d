bash levels.sh app.log
