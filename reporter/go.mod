module github.com/nodepulse/nodepulse/reporter

go 1.26.0
