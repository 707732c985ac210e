//! Portuguese (Brazilian, "você" for the owner): every key of `en.rs`, translated.

use super::Key::{self, *};

pub(super) fn text(key: Key) -> &'static str {
    match key {
        TitleOf => "{}: como o assistente de vendas se saiu",
        Title => "Como o assistente de vendas se saiu",
        Generated => "gerado {} · {} semana(s), de segunda a domingo (UTC) · manychat-agent {}",
        NoTurns => "Ainda não há conversas: nada foi registrado nas últimas {} semana(s).",
        WeekOf => "Semana de {}",
        NoTurnsThisWeek => "Nenhuma conversa nesta semana.",
        Week => "semana",
        None_ => "nenhum",
        AboveFlag => "acima de {}: lento demais",
        AtAGlance => "Resumo: a semana de {}",
        WhatEachMeans => "O que cada número significa",
        NotMeasuredYet => "Ainda não medido",
        NotSetUp => "não configurado",

        Contacts => "contatos novos",
        ContactsMeans => "Pessoas que escreveram para você pela primeira vez naquela semana.",
        Answers => "respondidas pelo assistente",
        AnswersMeans => {
            "Mensagens que o assistente de IA respondeu, ou que ele mesmo passou para uma pessoa."
        }
        Late => "respondidas um pouco depois",
        LateMeans => {
            "Das respostas do assistente, a parte que demorou mais do que o ManyChat espera e \
             chegou um pouco depois como uma mensagem separada; acima de 20 % o assistente está \
             lento demais para os seus contatos."
        }
        Merged => "mensagens enviadas em partes",
        MergedMeans => {
            "Das mensagens que iniciaram uma resposta, a parte que juntou nessa única resposta \
             outras mensagens enviadas em seguida."
        }
        WaitTypical => "espera típica",
        WaitTypicalMeans => {
            "Quanto tempo metade dos seus contatos esperou no máximo por uma resposta imediata."
        }
        WaitSlowest => "maior espera usual",
        WaitSlowestMeans => {
            "Quanto tempo 95 de cada 100 contatos esperaram no máximo por uma resposta imediata."
        }
        Lookups => "consultas aos dados do contato, por resposta",
        LookupsMeans => {
            "Quantas vezes o assistente consultou os dados de um contato no ManyChat, por \
             resposta."
        }
        Tokens => "leitura e escrita da IA, por resposta",
        TokensMeans => {
            "Quanto texto o modelo de IA leu e escreveu por resposta, em tokens (cerca de quatro \
             letras cada); mais texto custa mais."
        }
        CostPerAnswer => "custo do modelo de IA por resposta",
        CostPerAnswerMeans => "O que o modelo de IA cobrou por resposta, em dólares americanos.",
        Cost => "custo do modelo de IA",
        CostMeans => "O que o modelo de IA cobrou naquela semana, em dólares americanos.",
        Interested => "interessados em comprar",
        InterestedMeans => "Pessoas que o assistente registrou como interessadas em comprar.",
        InterestedShare => "parte interessada",
        InterestedShareMeans => "Dos contatos novos, a parte que tinha interesse em comprar.",
        Offered => "viram uma oferta",
        OfferedMeans => {
            "Pessoas a quem o assistente mostrou uma das suas ofertas, ou que foram além."
        }
        Prepared => "prontos para pagar",
        PreparedMeans => {
            "Pessoas que já tinham escolhido uma oferta e estavam prontas para pagar, ou que \
             foram além."
        }
        LinkSent => "receberam o link de pagamento",
        LinkSentMeans => {
            "Pessoas que receberam o seu link de pagamento (os pagamentos são confirmados no \
             ManyChat)."
        }
        LinkRate => "receberam o link, dos contatos novos",
        LinkRateMeans => "Dos contatos novos, a parte que recebeu o link de pagamento.",
        LinkRateInterested => "receberam o link, dos interessados",
        LinkRateInterestedMeans => {
            "Das pessoas interessadas em comprar, a parte que recebeu o link de pagamento."
        }
        LinkOnRequest => "links enviados antes, a pedido",
        LinkOnRequestMeans => {
            "Dos links de pagamento enviados, a parte enviada antes de o contato escolher, \
             porque ele pediu; perto de 100 % o assistente talvez diga que pediram quando não \
             pediram."
        }
        FollowUps => "acompanhamentos respondidos",
        FollowUpsMeans => {
            "Das mensagens de acompanhamento que o assistente enviou, a parte que o contato \
             respondeu em até um dia."
        }
        LastWords => "últimas mensagens respondidas",
        LastWordsMeans => {
            "Das mensagens enviadas quando a janela de 24 horas de um contato ia fechar, a parte \
             que o contato respondeu em até um dia."
        }
        Conversations => "conversas",
        ConversationsMeans => {
            "Pessoas que escreveram naquela semana, novas ou não: as mensagens de cada uma são \
             uma conversa."
        }
        Sales => "vendas (link de pagamento enviado)",
        SalesMeans => {
            "Conversas que chegaram ao seu link de pagamento naquela semana (os pagamentos são \
             confirmados no ManyChat)."
        }
        CostPerConversation => "custo do modelo de IA por conversa",
        CostPerConversationMeans => {
            "O que o modelo de IA cobrou pelas mensagens de um contato naquela semana, em média, \
             em dólares americanos."
        }
        CostPerSale => "custo do modelo de IA por venda",
        CostPerSaleMeans => {
            "Quanto custou em média uma conversa que chegou ao seu link de pagamento, em dólares \
             americanos."
        }
        SpendPerSale => "gasto do modelo de IA por venda",
        SpendPerSaleMeans => {
            "Todo o custo do modelo de IA da semana dividido pelas conversas que chegaram ao seu \
             link de pagamento: quanto custou cada venda, contando as conversas que não \
             compraram."
        }
        CostPerHandoff => "custo do modelo de IA por transferência",
        CostPerHandoffMeans => {
            "Quanto custou em média uma conversa passada para a sua equipe, em dólares americanos."
        }
        CachedShare => "texto relido",
        CachedShareMeans => {
            "Do texto que o modelo de IA leu, a parte que ele já tinha lido e cobrou mais barato."
        }
        Handoffs => "passados para uma pessoa",
        HandoffsMeans => {
            "Vezes que o assistente passou um contato para a sua equipe (depois fica de fora da \
             conversa enquanto uma pessoa cuida dela)."
        }
        Releases => "devolvidos ao assistente",
        ReleasesMeans => {
            "Vezes que uma conversa voltou para o assistente: a espera acabou, a sua equipe \
             removeu a etiqueta de transferência ou alguém liberou o contato."
        }
        HoursWithPerson => "horas com uma pessoa",
        HoursWithPersonMeans => {
            "Quanto tempo uma pessoa costuma cuidar de uma conversa antes de ela voltar para o \
             assistente (a mediana)."
        }
        Held => "mensagens deixadas para a sua equipe",
        HeldMeans => {
            "Mensagens que o assistente não respondeu porque uma pessoa cuidava da conversa."
        }

        SectionFunnel => "Da primeira mensagem ao link de pagamento",
        SectionWeeks => "Como o assistente respondeu",
        SectionSales => "Vendas",
        SectionCost => "Quanto custou o modelo de IA (dólares americanos)",
        SectionHandoffs => "Quando uma pessoa assumiu",
        SectionPerDay => "Dia a dia",
        HowMessagesEnded => "como as mensagens terminaram",
        MessagesColumn => "mensagens",
        WhyHandedOver => "por que contatos foram passados para uma pessoa",
        TimesColumn => "vezes",
        WhatItDid => "o que o assistente fez no ManyChat",
        HowItWent => "como foi",
        PerDayLine => "{}: {} respondidas, {}",
        Day => "dia",

        PlaybookTitle => "Receberam o link de pagamento, por versão do manual de vendas",
        PlaybookReading => {
            "Uma leitura de antes e depois, não um experimento controlado: cada versão atendeu \
             outros contatos em outro momento, então uma diferença pode vir deles e não do \
             manual."
        }
        PlaybookCounted => {
            "Cada conversa conta sob o manual (as táticas que você aprovou) que o assistente \
             usou quando mostrou uma oferta ao contato pela primeira vez, depois de passadas \
             duas semanas desde a última mensagem da conversa; até lá ela ainda está se \
             assentando. \"Receberam o link\" quer dizer que o assistente enviou o seu link de \
             pagamento: os pagamentos são confirmados no ManyChat e não são contados aqui."
        }
        PlaybookVersion => "versão",
        PlaybookFirstLive => "ativa desde",
        PlaybookGotLink => "receberam o link",
        PlaybookShare => "proporção",
        PlaybookSettling => "ainda se assentando",
        PlaybookNone => "sem manual",
        PlaybookActive => "{} (ativa)",

        ChartFunnelTitle => "Da primeira mensagem ao link de pagamento, semana de {}",
        ChartFunnelAlt => "Gráfico de barras, semana de {}: {}.",
        ChartWeeklyTitle => "Conversas e vendas, semana a semana",
        ChartWeeklyAlt => "Gráfico de barras, semana a semana: {}.",
        ChartHandoffsTitle => "Por que contatos foram passados para uma pessoa, todas as semanas",
        ChartHandoffsAlt => "Gráfico de barras das transferências por motivo: {}.",
        ChartCostTitle => {
            "Custo do modelo de IA por conversa, semana a semana (dólares americanos)"
        }
        ChartCostAlt => "Gráfico de linhas do custo do modelo de IA por conversa: {}.",
        ChartPlaybooksTitle => {
            "Receberam o link de pagamento, por versão do manual (antes e depois)"
        }
        ChartPlaybooksAlt => {
            "Gráfico de barras da parte das conversas que recebeu o link de pagamento, por \
             versão do manual: {}."
        }
        ChartEmpty => {
            "Ainda não há nada para desenhar: o gráfico se preenche quando os contatos escrevem."
        }
        ChartNoData => "sem dados",

        PendingSteps => "passos do modelo de IA por resposta",
        PendingStepsWhy => {
            "os passos de cada resposta são escritos no registro do serviço, não são guardados"
        }
        PendingSales => "números de vendas",
        PendingSalesWhy => {
            "os arquivos do negócio (CONFIG_DIR) não carregaram, então a configuração de vendas \
             é desconhecida"
        }
        PendingIntentWhy => "o tools.json não tem um campo para o interesse de compra do contato",
        PendingFunnelWhy => "o tools.json não tem um campo para o avanço de uma venda",
        PendingCostPerSaleWhy => {
            "o tools.json não tem um campo para o avanço de uma venda, então nenhuma conversa \
             chega ao link de pagamento"
        }
        PendingLinkWhy => "o tools.json não tem um fluxo de link de pagamento",
        PendingPlaybooksWhy => {
            "o tools.json precisa de um campo para o avanço de uma venda e de um fluxo de link \
             de pagamento"
        }

        OutcomeAnsweredInline => "respondida na hora",
        OutcomeDeferred => "respondida um pouco depois",
        OutcomeScripted => "respondida com a sua resposta de abertura fixa",
        OutcomeEscalatedModel => "passada para uma pessoa pelo assistente",
        OutcomeEscalatedPrecheck => {
            "passada para uma pessoa antes de o assistente ler (uma palavra-chave, um limite ou \
             o orçamento)"
        }
        OutcomeFailedValidation => {
            "passada para uma pessoa: a resposta do assistente não passou numa verificação"
        }
        OutcomeError => "passada para uma pessoa: o assistente não conseguiu responder",
        OutcomeNudge => "acompanhamento enviado",
        OutcomeWindowClosing => "última mensagem antes de a janela fechar",
        OutcomeMediaFallback => "um áudio ou arquivo que não pôde ser lido",
        OutcomeHeld => "deixada para a sua equipe: uma pessoa cuidava da conversa",
        OutcomeContactBusy => {
            "registrada, sem resposta: o contato enviou muitas mensagens de uma vez"
        }

        ReasonPrice => "queria negociar o preço",
        ReasonComplaint => "fez uma reclamação",
        ReasonOutOfScope => "perguntou algo que o seu catálogo não responde",
        ReasonExplicit => "pediu para falar com uma pessoa",
        ReasonLowConfidence => "o assistente não tinha certeza",
        ReasonPaymentReported => "disse que já pagou (uma pessoa confirma)",
        ReasonKeyword => "escreveu uma das suas palavras-chave de transferência",
        ReasonTurnCap => "chegou ao limite de mensagens da conversa",
        ReasonRateLimit => "escreveu mensagens demais em uma hora",
        ReasonBudget => "o orçamento de IA de hoje acabou",
        ReasonBudgetContact => "o orçamento de IA de hoje para esse contato acabou",
        ReasonAbort => "o modelo de IA demorou demais",
        ReasonCheckFailed => "a resposta do assistente não passou numa verificação",
        ReasonError => "o assistente não conseguiu responder",
        ReasonLoadShed => "conversas demais ao mesmo tempo",
        ReasonDeadLettered => "uma resposta que o ManyChat nunca entregou",
        ReasonWaitExpired => "esperou demais atrás das próprias mensagens anteriores",
        ReasonInterrupted => "o serviço parou antes de responder",
        ReasonMedia => "enviou um áudio ou arquivo que o assistente não conseguiu ler",

        ToolSendFlow => "fluxo enviado",
        ToolSetField => "campo do contato gravado",
        ToolAddTag => "etiqueta adicionada",
        ToolRemoveTag => "etiqueta removida",
        ToolWriteNote => "nota para a sua equipe",
        ToolScheduleNudge => "acompanhamento agendado",
        ToolHandoff => "passado para uma pessoa",
        StatusPerformed => "feito",
        StatusFailed => "falhou",
        StatusDiscarded => "não feito: o contato foi passado para uma pessoa",
        StatusOverCap => "não feito: acima do limite por resposta",
        StatusDeadLettered => "nunca entregue",
        StatusStaged => "ainda por fazer",
        StatusRefused => "recusado",

        ReleaseExpired => "a espera acabou",
        ReleaseTagRemoved => "a sua equipe removeu a etiqueta de transferência",
        ReleaseReleased => "alguém liberou o contato",

        SimReadFrom => "(o que o assistente fez, lido de {}:)",
        SimCannotRead => {
            "(o que o assistente fez está no banco de dados do serviço, e este comando não \
             consegue ler {}: {}. Rode o simulate junto ao serviço, com o DATABASE_URL dele, \
             para ver.)"
        }
        SimNoTurn => "ainda não há nenhuma resposta registrada para este contato",
        SimNoAction => "nenhuma ação no ManyChat",
        SimHandedOver => "passado para uma pessoa, motivo gravado: {} ({})",
        SimQueued => {
            "uma resposta virá pela fila de saída (o fluxo de resposta do ManyChat), prevista \
             para as {}"
        }
        SimFieldSet => "campo {} gravado com {}",
        SimFlowSent => "fluxo {} enviado",
        SimTagAdded => "etiqueta {} adicionada",
        SimTagRemoved => "etiqueta {} removida",
        SimNoteWritten => "nota {} escrita ({} caracteres)",
        SimNudgeScheduled => "um acompanhamento agendado",
        SimFailed => "falhou: {}",
        SimRefused => "recusado: {}",
        SimHandoffEnded => {
            "passado a uma pessoa: o turno terminou {} (veja a linha do registo do serviço para esta conversa, {})"
        }
        SimHandoffBeforeModel => "passado a uma pessoa antes de o modelo responder: {}",
        SimHandoffSomeCheck => {
            "uma palavra-chave, o limite de turnos, o limite por hora ou o orçamento diário"
        }
        SimWhyKeyword => "a mensagem contém uma das escalationKeywords do rules.json",
        SimWhyTurnCap => {
            "o limite de turnos: mais de {} mensagens sem uma pausa de {} horas (rules.json maxTurnsPerConversation); escreva como um contacto novo (simulate sem --subscriber) ou apague os dados da demo (README, The two commands)"
        }
        SimWhyRate => {
            "o limite por hora: {} mensagens nesta hora (rules.json rateLimit.turnsPerSubscriberPerHour é {})"
        }
        SimWhyBudget => {
            "o orçamento de tokens ou de custo de hoje está esgotado (rules.json budget)"
        }
        SimHeldSince => {
            "(em espera de uma pessoa: o contacto passou a uma pessoa em {}, por isso o assistente não respondeu nem enviou nada; a mensagem fica guardada)"
        }
        SimHoldEndsAt => "em {}",
        SimHoldEndsTag => "quando a etiqueta {} for retirada do contacto no ManyChat",
        SimHoldEndsRelease => "quando alguém o libertar",
        SimHoldEnds => "(a espera termina {})",
        SimHoldOr => "ou",
        SimHandBack => {
            "(para devolver o contacto ao assistente agora: manychat-agent release {}, ou POST {} com {\"subscriber_id\": \"{}\"} e o segredo partilhado)"
        }

        ConBrand => "console do manychat-agent",
        ConSkip => "Ir para o conteúdo",
        ConNavLabel => "Menu do console",
        ConNavRunning => "Em execução",
        ConNavTry => "Experimentar",
        ConNavConversations => "Conversas",
        ConNavHeld => "Com uma pessoa",
        ConNavReport => "Relatório",
        ConNavLearning => "Aprendizado",
        ConLogout => "Sair",
        ConNotFound => "Não encontrado",
        ConBackToConversations => "Voltar às conversas",
        ConRefusedTitle => "Não feito",
        ConLogInFirst => "Sua sessão terminou: entre e tente de novo.",
        ConStaleForm => {
            "Este formulário está desatualizado: nada foi feito. Abra a página de novo e tente \
             outra vez."
        }
        ConBackToConsole => "Voltar ao console",
        ConStoreDown => {
            "O banco de dados não respondeu: nada foi feito. Tente de novo em um instante."
        }
        ConTooManyAttempts => "Tentativas de entrar demais: espere um minuto e tente de novo.",
        ConBadPageLink => "Esse link de página não é válido.",
        ConNoConversation => "Nenhuma conversa tem esse identificador.",
        ConNotTestContact => {
            "Esse não é um contato de teste: o teste só escreve como contato de teste."
        }
        ConLoginTitle => "Entrar na conta",
        ConLoginHeading => "Console do dono",
        ConPassword => "Senha",
        ConWrongPassword => "Essa senha não está certa.",
        ConRunningTitle => "O que está em execução",
        ConReload => "Recarregamento",
        ConReloaded => "Recarregado: os arquivos do disco estão agora em vigor.",
        ConReloadRefused => {
            "Recusado: a configuração em vigor continua. O que os arquivos do disco quebram:"
        }
        ConReloadTimedOut => {
            "Não recarregado: ler a pasta de configuração demorou demais; a configuração em \
             vigor continua."
        }
        ConReloadStillReading => {
            "Não recarregado: um recarregamento anterior ainda lê a pasta; a configuração em \
             vigor continua."
        }
        ConProcess => "Processo",
        ConVersion => "Versão",
        ConModel => "Modelo de IA",
        ConStore => "Banco de dados",
        ConConfigInForce => "Configuração em vigor",
        ConFolder => "Pasta",
        ConFiles => "Arquivos",
        ConOfferings => "Ofertas do catálogo",
        ConFlows => "Fluxos",
        ConTags => "Etiquetas do ManyChat",
        ConPluginTools => "Ferramentas do negócio",
        ConOnDisk => "Arquivos no disco agora",
        ConDiskValid => "Válidos: um recarregamento os aplicaria.",
        ConDiskInvalid => "Inválidos: um recarregamento seria recusado.",
        ConReloadButton => "Recarregar a configuração",
        ConReloadHint => {
            "Faz o mesmo que SIGHUP: os arquivos são verificados por inteiro, e um conjunto \
             recusado não muda nada."
        }
        ConIssueAt => "no ponto",
        ConHeldTitle => "Com uma pessoa",
        ConDoneReleased => "Devolvido: o assistente responde à próxima mensagem deste contato.",
        ConDoneAlreadyReleased => {
            "Nada a fazer: este contato não estava com uma pessoa (já devolvido, por você, \
             por outro dono ou pelo fim da espera)."
        }
        ConDoneHeld => {
            "Com uma pessoa: o assistente fica fora desta conversa até que ela seja \
             devolvida."
        }
        ConDoneAlreadyHeld => "Nada a fazer: este contato já está com uma pessoa.",
        ConDoneHoldOff => {
            "Não passado a uma pessoa: as regras do negócio não retêm ninguém \
             (handoff.holdHours é 0)."
        }
        ConHoldsNobody => "As regras do negócio não retêm ninguém (handoff.holdHours é 0).",
        ConNoneHeld => {
            "Ninguém está com uma pessoa agora: o assistente responde a todos os contatos."
        }
        ConHoldEnds => {
            "A espera termina sozinha {} horas depois da transferência, quando a etiqueta de \
             transferência é removida no ManyChat, ou aqui."
        }
        ConConversation => "Conversa",
        ConTestContactTag => "contato de teste",
        ConHeldTag => "com uma pessoa",
        ConHeldSince => "Com uma pessoa desde {} · por quê: {}",
        ConNoReasonRecorded => {
            "nenhum turno registrou um motivo (passado pelo console, ou transferido enquanto \
             o banco de dados não respondia)"
        }
        ConHandBack => "Devolver ao assistente",
        ConHideTests => "Ocultar os contatos de teste",
        ConShowTests => "Mostrar também os contatos de teste",
        ConNewest => "As mais recentes",
        ConNoConversations => "Ainda não há conversas aqui.",
        ConRowLine => "Última mensagem {} · etapa {} · oferta {}",
        ConOlderConversations => "Conversas anteriores",
        ConTurnsNewestFirst => "Mensagens, as mais recentes primeiro",
        ConNoTurnsOnPage => "Não há mensagens nesta página.",
        ConOlderTurns => "Mensagens anteriores",
        ConNewestTurns => "Mensagens mais recentes",
        ConContact => "Contato",
        ConChannel => "Canal de mensagens",
        ConFirstContact => "Primeiro contato",
        ConLastMessage => "Última mensagem",
        ConStage => "Etapa de venda",
        ConOffering => "Oferta escolhida",
        ConMessagesCounted => "Mensagens contadas",
        ConTestContact => "Contato de teste",
        ConContinueTryout => "Continuar o teste",
        ConHeldSinceDot => "Com uma pessoa desde {}.",
        ConAssistantAnswers => "O assistente responde a este contato.",
        ConHandToPerson => "Passar a uma pessoa",
        ConHoldHint => {
            "Faz o mesmo que uma transferência do assistente: o contato fica com uma pessoa e \
             a transferência do negócio (sua etiqueta, seu fluxo) vai ao ManyChat."
        }
        ConRoleContact => "Contato",
        ConRoleAgent => "Assistente",
        ConUnbound => "sem vínculo (sem token de contato válido)",
        ConTextRemoved => "(texto apagado após o prazo de retenção, ou nenhum)",
        ConMedia => "Anexo: {}",
        ConOutcome => "Resultado do turno",
        ConHandedToPerson => "Passado a uma pessoa",
        ConGuardrails => "Verificações",
        ConTokens => "Tokens de IA usados",
        ConTokensLine => "{} lidos ({} em cache, {} gravados no cache), {} escritos",
        ConCost => "Custo",
        ConTime => "Tempo",
        ConContactReads => "Leituras do contato",
        ConSteps => "Passos (chamadas ao modelo)",
        ConPlaybook => "Manual de vendas",
        ConToolsRead => "Ferramentas do negócio consultadas",
        ConToolAnswered => "respondeu",
        ConToolUnavailable => "indisponível",
        ConInMs => "em {}",
        ConKnowledgeGiven => "Conhecimento dado",
        ConKnowledgeNone => "nada correspondeu: nenhum dado",
        ConNotRecorded => "não registrado nesta mensagem",
        ConNoToolOffered => "Nenhuma ferramenta foi oferecida.",
        ConToolsNoneUsed => "Ferramentas oferecidas; nenhuma usada.",
        ConWhatItDid => "O que fez",
        ConCharacters => "({} caracteres de texto)",
        ConByServer => "pelo servidor: {}",
        ConTryTitle => "Experimentar o assistente",
        ConTryLive => {
            "Isto usa a configuração e o modelo reais ({}): cada mensagem custa tokens reais."
        }
        ConTryMock => "O modelo em vigor ({}) não chama nenhum provedor: nada é cobrado.",
        ConTryHint => {
            "Você escreve como um contato de teste. As chamadas dele ao ManyChat são \
             registradas abaixo e nunca enviadas; os contatos de teste ficam fora do \
             relatório."
        }
        ConTryOff => {
            "O teste está desligado: MANYCHAT_SHARED_SECRET não está definido, então a rota o \
             recusaria."
        }
        ConTryAnswered => "A rota respondeu HTTP {}",
        ConTry429 => "este contato enviou mensagens demais na sua janela (o limite por contato).",
        ConTry400 => "a mensagem foi recusada (longa demais, ou inválida).",
        ConTry401 => "o segredo compartilhado foi recusado.",
        ConTestContactHeading => "Contato de teste {}",
        ConNewTestContact => "Um novo contato de teste",
        ConSeeConversation => "Ver esta conversa",
        ConStartNew => "Começar com um novo contato de teste",
        ConTheConversation => "A conversa",
        ConNoMessagesYet => "Ainda não há mensagens: escreva a primeira.",
        ConMessageAsContact => "Mensagem, como o contato",
        ConSend => "Mandar",
        ConCallsTitle => "Chamadas ao ManyChat (registradas, não enviadas)",
        ConNoCallsYet => {
            "Nenhuma ainda. As chamadas feitas depois da resposta (suas ações, uma resposta \
             adiada) aparecem ao recarregar."
        }
        ConTokenMasked => "[token, {} caracteres de texto]",
        ConReportIntro => {
            "As semanas de segunda a domingo (UTC), como o comando report as mostra; os \
             contatos de teste ficam de fora."
        }
        ConReportWeeks => "Semanas mostradas no relatório",
        ConShow => "Exibir",
        ConLearningTitle => "Aprender com o que vendeu",
        ConLearningOff => {
            "O aprendizado está desligado para este negócio. Para ligá-lo, adicione uma seção \
             learning ao rules.json (convertedTag, maxRunCostUsd) e defina INSIGHT_MODEL; \
             docs/LEARNING.md explica como."
        }
        ConLearningIntro => {
            "Uma vez por semana um analista compara as conversas que pagaram com as que não \
             pagaram e propõe táticas. Nada chega a um cliente até que você aprove e a nova \
             versão passe no teste de avaliação."
        }
        ConPendingTitle => "Esperando sua revisão",
        ConNoPending => {
            "Nenhuma proposta está esperando: a próxima execução semanal pode trazer algumas."
        }
        ConProposal => "Proposta {}",
        ConWhyProposed => "Por que o analista a propõe",
        ConCohort => "Vista em {} conversas que pagaram e {} que não pagaram.",
        ConRunOf => {
            "Da execução de {}, que comparou {} contatos que pagaram com {} que não pagaram."
        }
        ConQuotes => "As mensagens que cita, limpas de dados pessoais como o analista as leu",
        ConQuoteGone => "mensagem {}: não é mais guardada",
        ConReasonLabel => "Seu motivo (registrado com a decisão)",
        ConEditLabel => "A tática como deve ficar (vazio para aprová-la como está)",
        ConApprove => "Aprovar",
        ConReject => "Rejeitar",
        ConApproveHint => {
            "Aprovar cria uma nova versão do manual; ela só entra em uso quando passa no teste \
             de avaliação abaixo."
        }
        ConVersionsTitle => "Versões do manual",
        ConNoVersions => "Ainda não há versões.",
        ConNoneActive => "Nenhuma versão está em uso: o assistente não usa manual.",
        ConVersionActive => "em uso agora",
        ConVersionWasActive => "esteve em uso antes",
        ConVersionNeverActive => "nunca em uso",
        ConVersionLine => "Versão {} · {} tática(s) · {}",
        ConActivate => "Colocar em uso (teste de avaliação)",
        ConRollBack => "Voltar para esta versão",
        ConGateHint => {
            "Colocar uma versão em uso exige um registro de avaliação dela contra o conjunto \
             de casos ({}), feito com um modelo real, que não falhe nenhum caso que a versão \
             em uso passa: o mesmo teste do comando insights activate. Uma versão que esteve \
             em uso volta sem o teste: é a reversão."
        }
        ConDecisionsTitle => "Decisões, as mais recentes primeiro",
        ConNoDecisions => "Ainda não há decisões.",
        ConDecApproved => "aprovou a proposta {}",
        ConDecRejected => "rejeitou a proposta {}",
        ConDecRetired => "retirou a tática {}",
        ConDecActivated => "colocou em uso a versão {}",
        ConDecRolledBack => "voltou para a versão {}",
        ConDecBy => "{} · {} · feito por {}",
        ConByConsole => "o console",
        ConByCli => "a linha de comando",
        ConDoneApproved => {
            "Aprovada: a versão {} do manual foi criada. Ainda não está em uso: avalie-a e \
             coloque-a em uso abaixo."
        }
        ConDoneUnchanged => "Registrado: o manual não mudou.",
        ConDoneRejected => "Rejeitada: a proposta e seu motivo ficam registrados.",
        ConDoneActivated => "A versão {} está em uso: o assistente a usa em menos de um minuto.",
        ConDoneRolledBack => "Voltou para a versão {}: o assistente a usa em menos de um minuto.",
        ConDoneAlreadyActive => "A versão {} já está em uso.",
        ConNotDone => "Não feito, nada mudou:",
        ConReasonNeeded => {
            "Diga por que a rejeita: o motivo fica registrado e ajuda na próxima revisão."
        }
    }
}
