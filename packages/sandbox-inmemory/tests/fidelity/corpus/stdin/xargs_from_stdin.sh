xargs echo got
