bash index.sh docs
