module github.com/nodepulse/nodepulse/monitor

go 1.26.0
