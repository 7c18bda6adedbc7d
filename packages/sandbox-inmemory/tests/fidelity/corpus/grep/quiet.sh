grep -q needle <<< 'haystack needle' && echo found
