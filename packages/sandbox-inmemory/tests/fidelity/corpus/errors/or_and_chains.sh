false || echo fallback
true && echo ok
false && echo skipped
echo end
