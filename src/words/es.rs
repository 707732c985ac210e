//! Spanish (neutral, "tú" for the owner): every key of `en.rs`, translated.

use super::Key::{self, *};

pub(super) fn text(key: Key) -> &'static str {
    match key {
        TitleOf => "{}: cómo le fue al asistente de ventas",
        Title => "Cómo le fue al asistente de ventas",
        Generated => "generado {} · {} semana(s), de lunes a domingo (UTC) · manychat-agent {}",
        NoTurns => {
            "Todavía no hay conversaciones: no se registró nada en las últimas {} semana(s)."
        }
        WeekOf => "Semana del {}",
        NoTurnsThisWeek => "Ninguna conversación esta semana.",
        Week => "semana",
        None_ => "ninguno",
        AboveFlag => "más de {}: demasiado lento",
        AtAGlance => "De un vistazo: la semana del {}",
        WhatEachMeans => "Qué significa cada cifra",
        NotMeasuredYet => "Todavía sin medir",
        NotSetUp => "sin configurar",

        Contacts => "contactos nuevos",
        ContactsMeans => "Personas que te escribieron por primera vez esa semana.",
        Answers => "respondidos por el asistente",
        AnswersMeans => {
            "Mensajes que el asistente de IA respondió, o que él mismo pasó a una persona."
        }
        Late => "respondidos un momento después",
        LateMeans => {
            "De las respuestas del asistente, la parte que tardó más de lo que ManyChat espera y \
             llegó un momento después como un mensaje aparte; por encima del 20 % el asistente \
             es demasiado lento para tus contactos."
        }
        Merged => "mensajes enviados en partes",
        MergedMeans => {
            "De los mensajes que iniciaron una respuesta, la parte que reunió en esa única \
             respuesta otros mensajes enviados seguidos."
        }
        WaitTypical => "espera habitual",
        WaitTypicalMeans => {
            "Cuánto esperó como mucho la mitad de tus contactos una respuesta dada al momento."
        }
        WaitSlowest => "espera más larga habitual",
        WaitSlowestMeans => {
            "Cuánto esperaron como mucho 95 de cada 100 contactos una respuesta dada al momento."
        }
        Lookups => "consultas de datos del contacto, por respuesta",
        LookupsMeans => {
            "Cuántas veces el asistente consultó los datos de un contacto en ManyChat, por \
             respuesta."
        }
        Tokens => "lectura y escritura de la IA, por respuesta",
        TokensMeans => {
            "Cuánto texto leyó y escribió el modelo de IA por respuesta, en tokens (unas cuatro \
             letras cada uno); más texto cuesta más."
        }
        CostPerAnswer => "costo del modelo de IA por respuesta",
        CostPerAnswerMeans => {
            "Lo que cobró el modelo de IA por respuesta, en dólares estadounidenses."
        }
        Cost => "costo del modelo de IA",
        CostMeans => "Lo que cobró el modelo de IA esa semana, en dólares estadounidenses.",
        Interested => "interesados en comprar",
        InterestedMeans => "Personas que el asistente registró como interesadas en comprar.",
        InterestedShare => "parte interesada",
        InterestedShareMeans => {
            "De los contactos nuevos, la parte que estaba interesada en comprar."
        }
        Offered => "vieron una oferta",
        OfferedMeans => {
            "Personas a las que el asistente mostró una de tus ofertas, o que llegaron más lejos."
        }
        Prepared => "listos para pagar",
        PreparedMeans => {
            "Personas que ya habían elegido una oferta y estaban listas para pagar, o que \
             llegaron más lejos."
        }
        LinkSent => "recibieron el enlace de pago",
        LinkSentMeans => {
            "Personas que recibieron tu enlace de pago (los pagos se confirman en ManyChat)."
        }
        LinkRate => "recibieron el enlace, de los contactos nuevos",
        LinkRateMeans => "De los contactos nuevos, la parte que recibió el enlace de pago.",
        LinkRateInterested => "recibieron el enlace, de los interesados",
        LinkRateInterestedMeans => {
            "De las personas interesadas en comprar, la parte que recibió el enlace de pago."
        }
        LinkOnRequest => "enlaces enviados antes, a pedido",
        LinkOnRequestMeans => {
            "De los enlaces de pago enviados, la parte enviada antes de que el contacto eligiera, \
             porque lo pidió; cerca del 100 % el asistente quizá dice que lo pidieron cuando no \
             fue así."
        }
        FollowUps => "seguimientos respondidos",
        FollowUpsMeans => {
            "De los mensajes de seguimiento que envió el asistente, la parte que el contacto \
             respondió en un día."
        }
        LastWords => "últimos mensajes respondidos",
        LastWordsMeans => {
            "De los mensajes enviados cuando la ventana de 24 horas de un contacto iba a cerrarse, \
             la parte que el contacto respondió en un día."
        }
        Conversations => "conversaciones",
        ConversationsMeans => {
            "Personas que escribieron esa semana, nuevas o no: los mensajes de cada una son una \
             conversación."
        }
        Sales => "ventas (enlace de pago enviado)",
        SalesMeans => {
            "Conversaciones que llegaron a tu enlace de pago esa semana (los pagos se confirman \
             en ManyChat)."
        }
        CostPerConversation => "costo del modelo de IA por conversación",
        CostPerConversationMeans => {
            "Lo que cobró el modelo de IA por los mensajes de un contacto esa semana, en \
             promedio, en dólares estadounidenses."
        }
        CostPerSale => "costo del modelo de IA por venta",
        CostPerSaleMeans => {
            "Lo que costó en promedio una conversación que llegó a tu enlace de pago, en dólares \
             estadounidenses."
        }
        SpendPerSale => "gasto del modelo de IA por venta",
        SpendPerSaleMeans => {
            "Todo el costo del modelo de IA de la semana dividido entre las conversaciones que \
             llegaron a tu enlace de pago: lo que costó cada venta, contando las conversaciones \
             que no compraron."
        }
        CostPerHandoff => "costo del modelo de IA por derivación",
        CostPerHandoffMeans => {
            "Lo que costó en promedio una conversación pasada a tu equipo, en dólares \
             estadounidenses."
        }
        CachedShare => "texto releído",
        CachedShareMeans => {
            "Del texto que leyó el modelo de IA, la parte que ya había leído y cobró más barata."
        }
        Handoffs => "pasados a una persona",
        HandoffsMeans => {
            "Veces que el asistente pasó un contacto a tu equipo (después no interviene mientras \
             una persona lleva la conversación)."
        }
        Releases => "devueltos al asistente",
        ReleasesMeans => {
            "Veces que una conversación volvió al asistente: se acabó la espera, tu equipo quitó \
             la etiqueta de derivación o alguien liberó al contacto."
        }
        HoursWithPerson => "horas con una persona",
        HoursWithPersonMeans => {
            "Cuánto tiempo suele llevar una persona una conversación antes de que vuelva al \
             asistente (la mediana)."
        }
        Held => "mensajes dejados a tu equipo",
        HeldMeans => {
            "Mensajes que el asistente no respondió porque una persona llevaba la conversación."
        }

        SectionFunnel => "Del primer mensaje al enlace de pago",
        SectionWeeks => "Cómo respondió el asistente",
        SectionSales => "Ventas",
        SectionCost => "Lo que costó el modelo de IA (dólares estadounidenses)",
        SectionHandoffs => "Cuando una persona tomó la conversación",
        SectionPerDay => "Día a día",
        HowMessagesEnded => "cómo terminaron los mensajes",
        MessagesColumn => "mensajes",
        WhyHandedOver => "por qué se pasaron contactos a una persona",
        TimesColumn => "veces",
        WhatItDid => "qué hizo el asistente en ManyChat",
        HowItWent => "cómo salió",
        PerDayLine => "{}: {} respondidos, {}",
        Day => "día",

        PlaybookTitle => "Recibieron el enlace de pago, por versión del manual de ventas",
        PlaybookReading => {
            "Una lectura de antes y después, no un experimento controlado: cada versión atendió \
             a otros contactos en otro momento, así que una diferencia puede venir de ellos y no \
             del manual."
        }
        PlaybookCounted => {
            "Cada conversación cuenta bajo el manual (las tácticas que aprobaste) que usó el \
             asistente cuando mostró una oferta al contacto por primera vez, una vez pasadas dos \
             semanas desde el último mensaje de la conversación; hasta entonces se está \
             asentando. \"Recibieron el enlace\" significa que el asistente envió tu enlace de \
             pago: los pagos se confirman en ManyChat y no se cuentan aquí."
        }
        PlaybookVersion => "versión",
        PlaybookFirstLive => "activa desde",
        PlaybookGotLink => "recibieron el enlace",
        PlaybookShare => "proporción",
        PlaybookSettling => "aún asentándose",
        PlaybookNone => "sin manual",
        PlaybookActive => "{} (activa)",

        ChartFunnelTitle => "Del primer mensaje al enlace de pago, semana del {}",
        ChartFunnelAlt => "Gráfico de barras, semana del {}: {}.",
        ChartWeeklyTitle => "Conversaciones y ventas, semana a semana",
        ChartWeeklyAlt => "Gráfico de barras, semana a semana: {}.",
        ChartHandoffsTitle => "Por qué se pasaron contactos a una persona, todas las semanas",
        ChartHandoffsAlt => "Gráfico de barras de las derivaciones por motivo: {}.",
        ChartCostTitle => {
            "Costo del modelo de IA por conversación, semana a semana (dólares estadounidenses)"
        }
        ChartCostAlt => "Gráfico de líneas del costo del modelo de IA por conversación: {}.",
        ChartPlaybooksTitle => {
            "Recibieron el enlace de pago, por versión del manual (antes y después)"
        }
        ChartPlaybooksAlt => {
            "Gráfico de barras de la parte de conversaciones que recibió el enlace de pago, por \
             versión del manual: {}."
        }
        ChartEmpty => {
            "Todavía no hay nada que dibujar: el gráfico se llena cuando escriben los contactos."
        }
        ChartNoData => "sin datos",

        PendingSteps => "pasos del modelo de IA por respuesta",
        PendingStepsWhy => {
            "los pasos de cada respuesta se escriben en el registro del servicio, no se guardan"
        }
        PendingSales => "cifras de ventas",
        PendingSalesWhy => {
            "los archivos del negocio (CONFIG_DIR) no se cargaron, así que no se conoce su \
             configuración de ventas"
        }
        PendingIntentWhy => "tools.json no tiene un campo para el interés de compra del contacto",
        PendingFunnelWhy => "tools.json no tiene un campo para el avance de una venta",
        PendingCostPerSaleWhy => {
            "tools.json no tiene un campo para el avance de una venta, así que ninguna \
             conversación llega al enlace de pago"
        }
        PendingLinkWhy => "tools.json no tiene un flujo de enlace de pago",
        PendingPlaybooksWhy => {
            "tools.json necesita un campo para el avance de una venta y un flujo de enlace de pago"
        }

        OutcomeAnsweredInline => "respondido al momento",
        OutcomeDeferred => "respondido un momento después",
        OutcomeScripted => "respondido con tu respuesta de apertura fija",
        OutcomeEscalatedModel => "pasado a una persona por el asistente",
        OutcomeEscalatedPrecheck => {
            "pasado a una persona antes de que el asistente lo leyera (una palabra clave, un \
             límite o el presupuesto)"
        }
        OutcomeFailedValidation => {
            "pasado a una persona: la respuesta del asistente no pasó una comprobación"
        }
        OutcomeError => "pasado a una persona: el asistente no pudo responder",
        OutcomeNudge => "seguimiento enviado",
        OutcomeWindowClosing => "último mensaje antes de que se cerrara la ventana",
        OutcomeMediaFallback => "una nota de voz o un archivo que no se pudo leer",
        OutcomeHeld => "dejado a tu equipo: una persona llevaba la conversación",
        OutcomeContactBusy => {
            "registrado, sin respuesta: el contacto envió muchos mensajes a la vez"
        }

        ReasonPrice => "quería negociar el precio",
        ReasonComplaint => "presentó una queja",
        ReasonOutOfScope => "preguntó algo que tu catálogo no responde",
        ReasonExplicit => "pidió hablar con una persona",
        ReasonLowConfidence => "el asistente no estaba seguro",
        ReasonPaymentReported => "dijo que ya pagó (una persona lo confirma)",
        ReasonKeyword => "escribió una de tus palabras clave de derivación",
        ReasonTurnCap => "llegó al límite de mensajes de la conversación",
        ReasonRateLimit => "escribió demasiados mensajes en una hora",
        ReasonBudget => "se agotó el presupuesto de IA de hoy",
        ReasonBudgetContact => "se agotó el presupuesto de IA de hoy para ese contacto",
        ReasonAbort => "el modelo de IA tardó demasiado",
        ReasonCheckFailed => "la respuesta del asistente no pasó una comprobación",
        ReasonError => "el asistente no pudo responder",
        ReasonLoadShed => "demasiadas conversaciones a la vez",
        ReasonDeadLettered => "una respuesta que ManyChat nunca entregó",
        ReasonWaitExpired => "esperó demasiado detrás de sus propios mensajes anteriores",
        ReasonInterrupted => "el servicio se detuvo antes de responder",
        ReasonMedia => "envió una nota de voz o un archivo que el asistente no pudo leer",

        ToolSendFlow => "flujo enviado",
        ToolSetField => "campo del contacto guardado",
        ToolAddTag => "etiqueta añadida",
        ToolRemoveTag => "etiqueta quitada",
        ToolWriteNote => "nota para tu equipo",
        ToolScheduleNudge => "seguimiento programado",
        ToolHandoff => "pasado a una persona",
        StatusPerformed => "hecho",
        StatusFailed => "falló",
        StatusDiscarded => "no hecho: el contacto pasó a una persona",
        StatusOverCap => "no hecho: por encima del límite por respuesta",
        StatusDeadLettered => "nunca entregado",
        StatusStaged => "todavía por hacer",
        StatusRefused => "rechazado",

        ReleaseExpired => "se acabó la espera",
        ReleaseTagRemoved => "tu equipo quitó la etiqueta de derivación",
        ReleaseReleased => "alguien liberó al contacto",

        SimReadFrom => "(lo que hizo el asistente, leído de {}:)",
        SimCannotRead => {
            "(lo que hizo el asistente está en la base de datos del servicio, y este comando no \
             puede leer {}: {}. Ejecuta simulate junto al servicio, con su DATABASE_URL, para \
             verlo.)"
        }
        SimNoTurn => "todavía no hay ninguna respuesta registrada para este contacto",
        SimNoAction => "ninguna acción en ManyChat",
        SimHandedOver => "pasado a una persona, motivo guardado: {} ({})",
        SimQueued => {
            "una respuesta llegará por la cola de salida (el flujo de respuesta de ManyChat), \
             prevista para las {}"
        }
        SimFieldSet => "campo {} guardado con {}",
        SimFlowSent => "flujo {} enviado",
        SimTagAdded => "etiqueta {} añadida",
        SimTagRemoved => "etiqueta {} quitada",
        SimNoteWritten => "nota {} escrita ({} caracteres)",
        SimNudgeScheduled => "un seguimiento programado",
        SimFailed => "falló: {}",
        SimRefused => "rechazado: {}",
        SimHandoffEnded => {
            "pasado a una persona: el turno terminó {} (vea la línea del registro del servicio para esta conversación, {})"
        }
        SimHandoffBeforeModel => "pasado a una persona antes de que el modelo respondiera: {}",
        SimHandoffSomeCheck => {
            "una palabra clave, el límite de turnos, el límite por hora o el presupuesto diario"
        }
        SimWhyKeyword => "el mensaje contiene una de las escalationKeywords de rules.json",
        SimWhyTurnCap => {
            "el límite de turnos: más de {} mensajes sin una pausa de {} horas (rules.json maxTurnsPerConversation); escriba como un contacto nuevo (simulate sin --subscriber) o borre los datos de la demo (README, The two commands)"
        }
        SimWhyRate => {
            "el límite por hora: {} mensajes en esta hora (rules.json rateLimit.turnsPerSubscriberPerHour es {})"
        }
        SimWhyBudget => {
            "el presupuesto de tokens o de coste de hoy está agotado (rules.json budget)"
        }
        SimHeldSince => {
            "(en espera de una persona: el contacto pasó a una persona el {}, así que el asistente no respondió ni envió nada; el mensaje queda guardado)"
        }
        SimHoldEndsAt => "el {}",
        SimHoldEndsTag => "cuando se quite la etiqueta {} del contacto en ManyChat",
        SimHoldEndsRelease => "cuando alguien lo libere",
        SimHoldEnds => "(la espera termina {})",
        SimHoldOr => "o",
        SimHandBack => {
            "(para devolver el contacto al asistente ahora: manychat-agent release {}, o POST {} con {\"subscriber_id\": \"{}\"} y el secreto compartido)"
        }

        ConBrand => "consola de manychat-agent",
        ConSkip => "Ir al contenido",
        ConNavLabel => "Consola",
        ConNavRunning => "En marcha",
        ConNavTry => "Probar",
        ConNavConversations => "Conversaciones",
        ConNavHeld => "Con una persona",
        ConNavReport => "Informe",
        ConNavLearning => "Aprendizaje",
        ConLogout => "Salir",
        ConNotFound => "No encontrado",
        ConBackToConversations => "Volver a las conversaciones",
        ConRefusedTitle => "No se hizo",
        ConLogInFirst => "Tu sesión terminó: entra y vuelve a intentarlo.",
        ConStaleForm => {
            "Este formulario está desactualizado: no se hizo nada. Abre la página de nuevo y \
             vuelve a intentarlo."
        }
        ConBackToConsole => "Volver a la consola",
        ConStoreDown => {
            "La base de datos no respondió: no se hizo nada. Inténtalo de nuevo en un momento."
        }
        ConTooManyAttempts => {
            "Demasiados intentos de entrar: espera un minuto y vuelve a intentarlo."
        }
        ConBadPageLink => "Ese enlace de página no es válido.",
        ConNoConversation => "Ninguna conversación tiene ese identificador.",
        ConNotTestContact => {
            "Ese no es un contacto de prueba: la prueba solo escribe como contacto de prueba."
        }
        ConLoginTitle => "Entrar",
        ConLoginHeading => "Consola del dueño",
        ConPassword => "Contraseña",
        ConWrongPassword => "Esa contraseña no es correcta.",
        ConRunningTitle => "Qué está en marcha",
        ConReload => "Recarga",
        ConReloaded => "Recargado: los archivos del disco están ahora en vigor.",
        ConReloadRefused => {
            "Rechazado: sigue la configuración en vigor. Lo que rompen los archivos del \
             disco:"
        }
        ConReloadTimedOut => {
            "No recargado: leer la carpeta de configuración tardó demasiado; sigue la \
             configuración en vigor."
        }
        ConReloadStillReading => {
            "No recargado: una recarga anterior todavía lee la carpeta; sigue la \
             configuración en vigor."
        }
        ConProcess => "Proceso",
        ConVersion => "Versión",
        ConModel => "Modelo de IA",
        ConStore => "Base de datos",
        ConConfigInForce => "Configuración en vigor",
        ConFolder => "Carpeta",
        ConFiles => "Archivos",
        ConOfferings => "Ofertas",
        ConFlows => "Flujos",
        ConTags => "Etiquetas",
        ConPluginTools => "Herramientas del negocio",
        ConOnDisk => "Archivos en el disco ahora",
        ConDiskValid => "Válidos: una recarga los aplicaría.",
        ConDiskInvalid => "No válidos: una recarga sería rechazada.",
        ConReloadButton => "Recargar la configuración",
        ConReloadHint => {
            "Hace lo mismo que SIGHUP: los archivos se revisan enteros, y un conjunto \
             rechazado no cambia nada."
        }
        ConIssueAt => "en",
        ConHeldTitle => "Con una persona",
        ConDoneReleased => "Devuelto: el asistente responde el próximo mensaje de este contacto.",
        ConDoneAlreadyReleased => {
            "Nada que hacer: este contacto no estaba con una persona (ya devuelto, por usted, \
             por otro dueño o por el fin de la espera)."
        }
        ConDoneHeld => {
            "Con una persona: el asistente no interviene en esta conversación hasta que se la \
             devuelvan."
        }
        ConDoneAlreadyHeld => "Nada que hacer: este contacto ya está con una persona.",
        ConDoneHoldOff => {
            "No pasado a una persona: las reglas del negocio no retienen a nadie \
             (handoff.holdHours es 0)."
        }
        ConHoldsNobody => "Las reglas del negocio no retienen a nadie (handoff.holdHours es 0).",
        ConNoneHeld => {
            "Nadie está con una persona ahora: el asistente responde a todos los contactos."
        }
        ConHoldEnds => {
            "La espera termina sola {} horas después del traspaso, cuando se quita la \
             etiqueta de traspaso en ManyChat, o aquí."
        }
        ConConversation => "Conversación",
        ConTestContactTag => "contacto de prueba",
        ConHeldTag => "con una persona",
        ConHeldSince => "Con una persona desde {} · por qué: {}",
        ConNoReasonRecorded => {
            "ningún turno registró un motivo (pasado desde la consola, o traspasado mientras \
             la base de datos no respondía)"
        }
        ConHandBack => "Devolver al asistente",
        ConHideTests => "Ocultar los contactos de prueba",
        ConShowTests => "Mostrar también los contactos de prueba",
        ConNewest => "Las más recientes",
        ConNoConversations => "Todavía no hay conversaciones aquí.",
        ConRowLine => "Último mensaje {} · etapa {} · oferta {}",
        ConOlderConversations => "Conversaciones anteriores",
        ConTurnsNewestFirst => "Mensajes, los más recientes primero",
        ConNoTurnsOnPage => "No hay mensajes en esta página.",
        ConOlderTurns => "Mensajes anteriores",
        ConNewestTurns => "Mensajes más recientes",
        ConContact => "Contacto",
        ConChannel => "Canal de mensajes",
        ConFirstContact => "Primer contacto",
        ConLastMessage => "Último mensaje",
        ConStage => "Etapa de venta",
        ConOffering => "Oferta elegida",
        ConMessagesCounted => "Mensajes contados",
        ConTestContact => "Contacto de prueba",
        ConContinueTryout => "Seguir la prueba",
        ConHeldSinceDot => "Con una persona desde {}.",
        ConAssistantAnswers => "El asistente responde a este contacto.",
        ConHandToPerson => "Pasar a una persona",
        ConHoldHint => {
            "Hace lo mismo que un traspaso del asistente: el contacto queda con una persona y \
             el traspaso del negocio (su etiqueta, su flujo) va a ManyChat."
        }
        ConRoleContact => "Contacto",
        ConRoleAgent => "Asistente",
        ConUnbound => "sin vincular (sin token de contacto válido)",
        ConTextRemoved => "(texto borrado tras el plazo de conservación, o ninguno)",
        ConMedia => "Archivo adjunto: {}",
        ConOutcome => "Resultado",
        ConHandedToPerson => "Pasado a una persona",
        ConGuardrails => "Controles",
        ConTokens => "Tokens de IA",
        ConTokensLine => "{} leídos ({} en caché, {} escritos en la caché), {} escritos",
        ConCost => "Costo",
        ConTime => "Tiempo",
        ConContactReads => "Lecturas del contacto",
        ConSteps => "Pasos (llamadas al modelo)",
        ConPlaybook => "Manual de ventas",
        ConToolsRead => "Herramientas del negocio consultadas",
        ConToolAnswered => "respondió",
        ConToolUnavailable => "no disponible",
        ConInMs => "en {}",
        ConKnowledgeGiven => "Conocimiento dado",
        ConKnowledgeNone => "nada coincidió: no se dio ninguno",
        ConNotRecorded => "no registrado en este mensaje",
        ConNoToolOffered => "No se ofreció ninguna herramienta.",
        ConToolsNoneUsed => "Herramientas ofrecidas; ninguna usada.",
        ConWhatItDid => "Lo que hizo",
        ConCharacters => "({} caracteres)",
        ConByServer => "por el servidor: {}",
        ConTryTitle => "Probar el asistente",
        ConTryLive => {
            "Esto usa la configuración y el modelo reales ({}): cada mensaje cuesta tokens \
             reales."
        }
        ConTryMock => "El modelo en vigor ({}) no llama a ningún proveedor: no se cobra nada.",
        ConTryHint => {
            "Usted escribe como un contacto de prueba. Sus llamadas a ManyChat se registran \
             abajo y nunca se envían; los contactos de prueba quedan fuera del informe."
        }
        ConTryOff => {
            "La prueba está apagada: MANYCHAT_SHARED_SECRET no está definido, así que la ruta \
             la rechazaría."
        }
        ConTryAnswered => "La ruta respondió HTTP {}",
        ConTry429 => {
            "este contacto envió demasiados mensajes en su ventana (el límite por contacto)."
        }
        ConTry400 => "el mensaje fue rechazado (demasiado largo, o no válido).",
        ConTry401 => "el secreto compartido fue rechazado.",
        ConTestContactHeading => "Contacto de prueba {}",
        ConNewTestContact => "Un contacto de prueba nuevo",
        ConSeeConversation => "Ver esta conversación",
        ConStartNew => "Empezar con un contacto de prueba nuevo",
        ConTheConversation => "La conversación",
        ConNoMessagesYet => "Todavía no hay mensajes: escriba el primero.",
        ConMessageAsContact => "Mensaje, como el contacto",
        ConSend => "Enviar",
        ConCallsTitle => "Llamadas a ManyChat (registradas, no enviadas)",
        ConNoCallsYet => {
            "Ninguna todavía. Las llamadas hechas después de la respuesta (sus acciones, una \
             respuesta diferida) aparecen al recargar."
        }
        ConTokenMasked => "[token, {} caracteres]",
        ConReportIntro => {
            "Las semanas de lunes a domingo (UTC), como las muestra el comando report; los \
             contactos de prueba quedan fuera."
        }
        ConReportWeeks => "Semanas mostradas",
        ConShow => "Mostrar",
        ConLearningTitle => "Aprender de lo que vendió",
        ConLearningOff => {
            "El aprendizaje está apagado para este negocio. Para encenderlo, agregue una \
             sección learning a rules.json (convertedTag, maxRunCostUsd) y defina \
             INSIGHT_MODEL; docs/LEARNING.md explica cómo."
        }
        ConLearningIntro => {
            "Una vez por semana un analista compara las conversaciones que pagaron con las \
             que no y propone tácticas. Nada llega a un cliente hasta que usted lo aprueba y \
             la nueva versión pasa la prueba de evaluación."
        }
        ConPendingTitle => "Esperando su revisión",
        ConNoPending => {
            "No hay propuestas esperando: la próxima ejecución semanal puede traer algunas."
        }
        ConProposal => "Propuesta {}",
        ConWhyProposed => "Por qué la propone el analista",
        ConCohort => "Vista en {} conversaciones que pagaron y {} que no.",
        ConRunOf => "De la ejecución de {}, que comparó {} contactos que pagaron con {} que no.",
        ConQuotes => "Los mensajes que cita, limpios de datos personales como los leyó el analista",
        ConQuoteGone => "mensaje {}: ya no se guarda",
        ConReasonLabel => "Su motivo (se registra con la decisión)",
        ConEditLabel => "La táctica como debe quedar (vacío para aprobarla tal cual)",
        ConApprove => "Aprobar",
        ConReject => "Rechazar",
        ConApproveHint => {
            "Aprobar crea una nueva versión del manual; solo entra en uso cuando pasa la \
             prueba de evaluación de abajo."
        }
        ConVersionsTitle => "Versiones del manual",
        ConNoVersions => "Todavía no hay versiones.",
        ConNoneActive => "Ninguna versión está en uso: el asistente no usa manual.",
        ConVersionActive => "en uso ahora",
        ConVersionWasActive => "estuvo en uso antes",
        ConVersionNeverActive => "nunca en uso",
        ConVersionLine => "Versión {} · {} táctica(s) · {}",
        ConActivate => "Poner en uso (prueba de evaluación)",
        ConRollBack => "Volver a esta versión",
        ConGateHint => {
            "Poner una versión en uso necesita un registro de evaluación de ella contra la \
             batería de casos ({}), hecho con un modelo real, que no falle ningún caso que \
             pasa la versión en uso: la misma prueba que el comando insights activate. Una \
             versión que estuvo en uso vuelve sin la prueba: es la vuelta atrás."
        }
        ConDecisionsTitle => "Decisiones, las más recientes primero",
        ConNoDecisions => "Todavía no hay decisiones.",
        ConDecApproved => "aprobó la propuesta {}",
        ConDecRejected => "rechazó la propuesta {}",
        ConDecRetired => "retiró la táctica {}",
        ConDecActivated => "puso en uso la versión {}",
        ConDecRolledBack => "volvió a la versión {}",
        ConDecBy => "{} · {} · por {}",
        ConByConsole => "la consola",
        ConByCli => "la línea de comandos",
        ConDoneApproved => {
            "Aprobada: se creó la versión {} del manual. Todavía no está en uso: evalúela y \
             póngala en uso abajo."
        }
        ConDoneUnchanged => "Registrado: el manual no cambió.",
        ConDoneRejected => "Rechazada: la propuesta y su motivo quedan registrados.",
        ConDoneActivated => "La versión {} está en uso: el asistente la usa en menos de un minuto.",
        ConDoneRolledBack => {
            "Se volvió a la versión {}: el asistente la usa en menos de un minuto."
        }
        ConDoneAlreadyActive => "La versión {} ya está en uso.",
        ConNotDone => "No hecho, nada cambió:",
        ConReasonNeeded => {
            "Diga por qué la rechaza: el motivo queda registrado y ayuda a la próxima \
             revisión."
        }
    }
}
